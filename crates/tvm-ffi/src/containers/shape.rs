//! `Shape`: an immutable array of `i64` stored inline after the shape cell.

use crate::abi::{TVMFFIShapeCell, kTVMFFIArray, kTVMFFIList, kTVMFFIShape};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::containers::array::Array;
use crate::object::{
    Object, ObjectCore, ObjectRef, rust_object_deleter, try_alloc_object_uninit_with_deleter,
};

/// Layout of `ffi.Shape` (index 69): header, cell, then the values.
#[repr(C)]
pub struct ShapeObj {
    base: Object,
    cell: TVMFFIShapeCell,
}

// SAFETY: the values are immutable and owned by the object.
unsafe impl Send for ShapeObj {}
// SAFETY: as above.
unsafe impl Sync for ShapeObj {}

// SAFETY: repr(C) with the header first.
unsafe impl ObjectCore for ShapeObj {
    const TYPE_KEY: &'static str = "ffi.Shape";
    fn type_index() -> i32 {
        kTVMFFIShape
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIShape
    }
}

impl ShapeObj {
    /// The values.
    pub fn as_slice(&self) -> &[i64] {
        if self.cell.size == 0 {
            return &[];
        }
        // SAFETY: the cell points at `size` values owned by (or kept alive with) the object.
        unsafe { std::slice::from_raw_parts(self.cell.data, self.cell.size) }
    }
}

/// An immutable tuple of dimensions.
#[derive(Clone)]
pub struct Shape {
    obj: ObjectRef<ShapeObj>,
}

impl Shape {
    /// A shape holding a copy of `dims`. Aborts when memory runs out, as a `Vec` does; see
    /// [`Shape::try_new`] for dimensions a caller counts.
    pub fn new(dims: &[i64]) -> Shape {
        Shape::try_new(dims).unwrap_or_else(|_| {
            crate::spare_block::abort_out_of_memory(std::mem::size_of_val(dims))
        })
    }

    /// A shape holding a copy of `dims`; a `MemoryError` when it does not fit in memory.
    pub fn try_new(dims: &[i64]) -> crate::Result<Shape> {
        let value = ShapeObj {
            base: Object::header(),
            cell: TVMFFIShapeCell {
                data: std::ptr::null(),
                size: 0,
            },
        };
        // SAFETY: repr(C) with the header first; the extra bytes hold plain integers, all
        // written below.
        let ptr = unsafe {
            try_alloc_object_uninit_with_deleter(
                value,
                std::mem::size_of_val(dims),
                kTVMFFIShape,
                rust_object_deleter::<ShapeObj>,
            )
        }
        .map_err(|_| {
            crate::Error::new(
                crate::ErrorKind::MemoryError,
                format!("cannot allocate a shape of {} dimensions", dims.len()),
            )
        })?;
        // SAFETY: the block has room for the values right after the 40-byte object.
        unsafe {
            let data = ptr.as_ptr().add(1).cast::<i64>();
            std::ptr::copy_nonoverlapping(dims.as_ptr(), data, dims.len());
            (*ptr.as_ptr()).cell = TVMFFIShapeCell {
                data,
                size: dims.len(),
            };
        }
        // SAFETY: the new object's reference moves into the shape.
        let obj = unsafe { ObjectRef::from_raw(ptr.as_ptr().cast()) };
        Ok(Shape { obj })
    }

    /// The dimensions.
    pub fn as_slice(&self) -> &[i64] {
        self.obj.as_slice()
    }

    /// Product of the dimensions.
    pub fn numel(&self) -> i64 {
        self.as_slice().iter().product()
    }
}

impl std::ops::Deref for Shape {
    type Target = [i64];
    fn deref(&self) -> &[i64] {
        self.as_slice()
    }
}

impl PartialEq for Shape {
    fn eq(&self, other: &Shape) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shape({:?})", self.as_slice())
    }
}

impl From<Shape> for Any {
    fn from(s: Shape) -> Any {
        Any::from_object(s.obj)
    }
}

impl TryFromAnyView for Shape {
    const TYPE_NAME: &'static str = "ffi.Shape";
    /// Accepts a shape, or an array or list of ints (copied into a new shape).
    fn try_from_view(view: &AnyView<'_>) -> Option<Shape> {
        if let Some(obj) = ObjectRef::<ShapeObj>::try_from_view(view) {
            return Some(Shape { obj });
        }
        if !matches!(view.type_index(), kTVMFFIArray | kTVMFFIList) {
            return None;
        }
        let items = Array::try_from_view(view)?;
        let dims = items
            .iter()
            .map(|item| item.cast::<i64>().ok())
            .collect::<Option<Vec<i64>>>()?;
        Some(Shape::new(&dims))
    }
}
