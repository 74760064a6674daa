//! `#[derive(Object)]` and `#[derive(ObjectRef)]` against the runtime: the type registered under
//! its key with its parent, the reflected fields (and the one skipped), a child type, and the
//! reference newtype's conversions.

use tvm_ffi::reflection::fields_of;
use tvm_ffi::{Any, AnyView, Object, ObjectCore, ObjectRef, TryFromAnyView};

use tvm_ffi_capi as _;

/// A point.
#[derive(Object)]
#[object(key = "derive_test.Point")]
#[repr(C)]
pub struct Point {
    base: Object,
    /// Across.
    pub x: i64,
    /// Up.
    pub y: f64,
    /// Not reflected.
    #[object(skip)]
    pub cache: i64,
}

/// A point with a label, a child of [`Point`].
#[derive(Object)]
#[object(key = "derive_test.LabelledPoint")]
#[repr(C)]
pub struct LabelledPoint {
    base: Point,
    /// A name.
    pub label: tvm_ffi::String,
}

/// A reference to a point.
#[derive(ObjectRef)]
pub struct PointRef(ObjectRef<Point>);

fn point(x: i64, y: f64) -> Point {
    Point {
        base: Object::header(),
        x,
        y,
        cache: 0,
    }
}

#[test]
fn types_register_under_their_key_with_their_parent_and_fields() {
    let index = Point::type_index();
    let p = ObjectRef::new(point(1, 2.5));
    assert_eq!(p.header().type_key(), "derive_test.Point");
    assert_eq!(p.type_index(), index);
    let names: Vec<_> = fields_of(index).map(|f| f.name()).collect();
    assert_eq!(names, ["x", "y"], "the skipped field is not reflected");
    let child = LabelledPoint::type_index();
    let names: Vec<_> = fields_of(child).map(|f| f.name()).collect();
    assert_eq!(
        names,
        ["x", "y", "label"],
        "a child reflects its parent's fields first"
    );
    let labelled = ObjectRef::new(LabelledPoint {
        base: point(3, 4.0),
        label: "p".into(),
    });
    let any = Any::from(labelled);
    assert!(
        ObjectRef::<Point>::try_from_view(&any.as_view()).is_some(),
        "a child is a Point"
    );
}

#[test]
fn references_convert_and_read_through_deref() {
    let p = PointRef::new(point(7, 0.5));
    assert_eq!((p.x, p.y), (7, 0.5));
    let any = Any::from(p.clone());
    let back = PointRef::try_from_view(&any.as_view()).expect("a point");
    assert_eq!(back.x, 7);
    assert_eq!(PointRef::TYPE_NAME, "derive_test.Point");
    assert!(PointRef::try_from_view(&AnyView::from(&Any::from(1i64))).is_none());
    let read = fields_of(Point::type_index())
        .find(|f| f.name() == "y")
        .expect("y")
        .get(&any)
        .expect("readable");
    assert_eq!(read.try_as::<f64>(), Some(0.5));
}
