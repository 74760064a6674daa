//! `#[derive(Object)]` and `#[derive(ObjectRef)]` for `tvm-ffi` (enabled by its `derive`
//! feature and re-exported as `tvm_ffi::Object` and `tvm_ffi::ObjectRef` in the macro
//! namespace).
//!
//! ```ignore
//! use tvm_ffi::{Object, ObjectRef};
//!
//! /// A point.
//! #[derive(Object)]
//! #[object(key = "example.Point")]
//! #[repr(C)]
//! pub struct Point {
//!     base: tvm_ffi::Object, // the parent part, first: its type is the parent type
//!     pub x: i64,
//!     pub y: i64,
//! }
//!
//! /// A reference to a point, as functions take and return it.
//! #[derive(ObjectRef)]
//! pub struct PointRef(tvm_ffi::ObjectRef<Point>);
//! ```
//!
//! `Object` registers the type under its key with the first field's type as the parent, and
//! every other field as a reflected field (`#[object(skip)]` leaves one out), the same as
//! `tvm_ffi::define_object!`. `ObjectRef` gives the newtype what a value of the type needs:
//! conversion from and to `Any` (a `TypeError` names the type key when a value is another
//! type), `Deref` to the object, `Clone`, and `new`.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::{Data, DeriveInput, Error, Fields, LitStr, Type, parse_macro_input};

/// Implements `ObjectCore` (and the default value reflection needs) for a `#[repr(C)]` struct
/// whose first field is its parent part; `#[object(key = "...")]` names the type.
#[proc_macro_derive(Object, attributes(object))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    object_impl(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Implements conversions, `Deref` and `Clone` for a newtype over `tvm_ffi::ObjectRef<T>`.
#[proc_macro_derive(ObjectRef)]
pub fn derive_object_ref(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    object_ref_impl(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// The type key of `#[object(key = "...")]`.
fn type_key(input: &DeriveInput) -> syn::Result<LitStr> {
    let mut key = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("key") {
                key = Some(meta.value()?.parse::<LitStr>()?);
                Ok(())
            } else {
                Err(meta.error("expected `key = \"...\"`"))
            }
        })?;
    }
    key.ok_or_else(|| {
        Error::new_spanned(
            &input.ident,
            "#[derive(Object)] needs #[object(key = \"namespace.Name\")]",
        )
    })
}

fn is_repr_c(input: &DeriveInput) -> bool {
    input.attrs.iter().any(|attr| {
        attr.path().is_ident("repr")
            && attr
                .parse_nested_meta(|meta| {
                    if meta.path.is_ident("C") {
                        Ok(())
                    } else {
                        Err(meta.error("not C"))
                    }
                })
                .is_ok()
    })
}

/// Whether a field carries `#[object(skip)]`.
fn skipped(field: &syn::Field) -> syn::Result<bool> {
    let mut skip = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else {
                Err(meta.error("expected `skip`"))
            }
        })?;
    }
    Ok(skip)
}

fn object_impl(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let key = type_key(input)?;
    if !is_repr_c(input) {
        return Err(Error::new_spanned(
            name,
            "#[derive(Object)] needs #[repr(C)]: C++ code reads the fields at their offsets",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(Error::new_spanned(name, "#[derive(Object)] takes a struct"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(Error::new_spanned(
            name,
            "#[derive(Object)] takes named fields",
        ));
    };
    let mut iter = fields.named.iter();
    let Some(base) = iter.next() else {
        return Err(Error::new_spanned(
            name,
            "the first field is the parent part (`base: tvm_ffi::Object` for a root type)",
        ));
    };
    let (base_name, parent) = (base.ident.as_ref().expect("named"), &base.ty);
    let mut reflected = Vec::new();
    let mut defaults = Vec::new();
    for field in iter {
        let (field_name, ty) = (field.ident.as_ref().expect("named"), &field.ty);
        defaults.push(quote! {
            #field_name: <#ty as ::tvm_ffi::reflection::FieldDefault>::field_default()
        });
        if !skipped(field)? {
            reflected.push((field_name, ty));
        }
    }
    let registrations = reflected.iter().map(|(field_name, ty)| {
        let text = LitStr::new(&field_name.to_string(), Span::call_site());
        quote! {
            ::tvm_ffi::reflection::register_field::<#ty>(
                index, #text, ::std::mem::offset_of!(#name, #field_name),
            ).unwrap_or_else(|e| panic!("cannot register a field of `{}`: {e}", #key));
        }
    });
    Ok(quote! {
        // SAFETY: repr(C) (checked by the derive) with the parent part, and so the header,
        // first; the index is the one the runtime assigned to the key.
        unsafe impl ::tvm_ffi::ObjectCore for #name {
            const TYPE_KEY: &'static str = #key;
            fn type_index() -> i32 {
                static INDEX: ::std::sync::OnceLock<i32> = ::std::sync::OnceLock::new();
                *INDEX.get_or_init(|| {
                    let parent = <#parent as ::tvm_ffi::ObjectCore>::type_index();
                    let index = ::tvm_ffi::types::register_type(#key, parent, 0, true)
                        .unwrap_or_else(|e| panic!("cannot register type `{}`: {e}", #key));
                    if !::tvm_ffi::reflection::has_fields(index) {
                        #(#registrations)*
                    }
                    let _ = ::tvm_ffi::reflection::register_metadata_with_creator::<#name>(index);
                    index
                })
            }
        }

        impl ::tvm_ffi::reflection::FieldDefault for #name {
            fn field_default() -> Self {
                #name {
                    #base_name: <#parent as ::tvm_ffi::reflection::FieldDefault>::field_default(),
                    #(#defaults,)*
                }
            }
        }
    })
}

/// `T` of a newtype over `ObjectRef<T>`.
fn referenced_type(input: &DeriveInput) -> syn::Result<&Type> {
    let error = || {
        Error::new_spanned(
            &input.ident,
            "#[derive(ObjectRef)] takes a newtype over tvm_ffi::ObjectRef<T>",
        )
    };
    let Data::Struct(data) = &input.data else {
        return Err(error());
    };
    let Fields::Unnamed(fields) = &data.fields else {
        return Err(error());
    };
    let (Some(field), 1) = (fields.unnamed.first(), fields.unnamed.len()) else {
        return Err(error());
    };
    let Type::Path(path) = &field.ty else {
        return Err(error());
    };
    let segment = path.path.segments.last().ok_or_else(error)?;
    let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
        return Err(error());
    };
    match (segment.ident == "ObjectRef", args.args.first()) {
        (true, Some(syn::GenericArgument::Type(ty))) => Ok(ty),
        _ => Err(error()),
    }
}

fn object_ref_impl(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let target = referenced_type(input)?;
    Ok(quote! {
        impl #name {
            /// A new object holding `value`, referenced.
            pub fn new(value: #target) -> #name {
                #name(::tvm_ffi::ObjectRef::new(value))
            }
        }

        impl ::std::clone::Clone for #name {
            fn clone(&self) -> #name {
                #name(::std::clone::Clone::clone(&self.0))
            }
        }

        impl ::std::ops::Deref for #name {
            type Target = #target;
            fn deref(&self) -> &#target {
                &self.0
            }
        }

        impl ::std::convert::From<::tvm_ffi::ObjectRef<#target>> for #name {
            fn from(reference: ::tvm_ffi::ObjectRef<#target>) -> #name {
                #name(reference)
            }
        }

        impl ::std::convert::From<#name> for ::tvm_ffi::Any {
            fn from(value: #name) -> ::tvm_ffi::Any {
                ::tvm_ffi::Any::from(value.0)
            }
        }

        impl ::tvm_ffi::TryFromAnyView for #name {
            const TYPE_NAME: &'static str = <#target as ::tvm_ffi::ObjectCore>::TYPE_KEY;
            fn try_from_view(view: &::tvm_ffi::AnyView<'_>) -> ::std::option::Option<#name> {
                <::tvm_ffi::ObjectRef<#target> as ::tvm_ffi::TryFromAnyView>::try_from_view(view)
                    .map(#name)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn object_error(input: DeriveInput) -> String {
        object_impl(&input).expect_err("refused").to_string()
    }

    #[test]
    fn object_types_are_refused_without_what_the_layout_needs() {
        let no_key: DeriveInput = parse_quote! {
            #[repr(C)]
            struct P { base: Object, x: i64 }
        };
        assert!(object_error(no_key).contains("needs #[object(key"));
        let no_repr: DeriveInput = parse_quote! {
            #[object(key = "t.P")]
            struct P { base: Object, x: i64 }
        };
        assert!(object_error(no_repr).contains("needs #[repr(C)]"));
        let tuple: DeriveInput = parse_quote! {
            #[object(key = "t.P")]
            #[repr(C)]
            struct P(Object, i64);
        };
        assert!(object_error(tuple).contains("named fields"));
        let empty: DeriveInput = parse_quote! {
            #[object(key = "t.P")]
            #[repr(C)]
            struct P {}
        };
        assert!(object_error(empty).contains("the first field is the parent part"));
        let unknown: DeriveInput = parse_quote! {
            #[object(name = "t.P")]
            #[repr(C)]
            struct P { base: Object }
        };
        assert!(object_error(unknown).contains("expected `key"));
        let enumeration: DeriveInput = parse_quote! {
            #[object(key = "t.P")]
            #[repr(C)]
            enum P { A }
        };
        assert!(object_error(enumeration).contains("takes a struct"));
    }

    #[test]
    fn object_types_expand_to_a_registration_of_each_field_but_the_skipped() {
        let input: DeriveInput = parse_quote! {
            #[object(key = "t.P")]
            #[repr(C)]
            struct P {
                base: Object,
                x: i64,
                #[object(skip)]
                cache: i64,
            }
        };
        let expanded = object_impl(&input).expect("expands").to_string();
        assert!(expanded.contains("\"t.P\""));
        assert!(expanded.contains("register_field :: < i64 > (index , \"x\""));
        assert!(!expanded.contains("\"cache\""), "{expanded}");
    }

    #[test]
    fn references_are_newtypes_over_object_ref() {
        let good: DeriveInput = parse_quote! { struct R(tvm_ffi::ObjectRef<P>); };
        assert!(object_ref_impl(&good).is_ok());
        for bad in [
            parse_quote! { struct R(P); },
            parse_quote! { struct R { p: ObjectRef<P> } },
            parse_quote! { struct R(ObjectRef<P>, i64); },
        ] {
            let error = object_ref_impl(&bad).expect_err("refused").to_string();
            assert!(
                error.contains("newtype over tvm_ffi::ObjectRef<T>"),
                "{error}"
            );
        }
    }
}
