//! Field types, the `Schema` trait, and the `zap_struct!` macro that lays out
//! a struct once so that no offset is written by hand anywhere else.

use crate::builder::{Storage, StructBuilder};
use crate::wire::StructReader;
use crate::Error;
use std::marker::PhantomData;

/// A struct type with a fixed layout; implemented by [`zap_struct!`](crate::zap_struct).
pub trait Schema {
    /// Name used in error messages.
    const NAME: &'static str;
    /// Size of the fixed section, rounded up to 8.
    const SIZE: usize;
    /// Each field's (offset, size) in the fixed section, in declaration order.
    const FIELDS: &'static [(usize, usize)];
    type Reader<'a>;
    type Builder<'b, S: Storage + 'b>;
    fn reader(s: StructReader<'_>) -> Self::Reader<'_>;
    fn builder<S: Storage>(s: StructBuilder<'_, S>) -> Self::Builder<'_, S>;
}

/// How one field type is laid out, read and written.
pub trait FieldType {
    /// Bytes the field takes in the fixed section.
    const SIZE: usize;
    /// Alignment of the field in the fixed section.
    const ALIGN: usize;
    /// What the reader returns.
    type Out<'a>;
    /// What the builder's setter takes.
    type In<'x>;
    /// What the builder's setter returns: `()`, or a builder for a nested struct.
    type Ret<'c, S: Storage + 'c>;
    fn read<'a>(s: &StructReader<'a>, off: usize, field: &'static str) -> Self::Out<'a>;
    fn write<'c, S: Storage>(b: &'c mut StructBuilder<'_, S>, off: usize, v: Self::In<'_>) -> Self::Ret<'c, S>;
}

/// Fixed-size little-endian values that may be struct fields and list elements.
pub trait Scalar: Copy + 'static {
    const WIDTH: usize;
    fn read_le(bytes: &[u8]) -> Self;
    fn write_le(self, out: &mut [u8]);
}

macro_rules! scalar {
    ($($t:ty = $n:literal),*) => {$(
        impl Scalar for $t {
            const WIDTH: usize = $n;
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                let mut a = [0u8; $n];
                if let Some(s) = bytes.get(..$n) { a.copy_from_slice(s); }
                <$t>::from_le_bytes(a)
            }
            #[inline]
            fn write_le(self, out: &mut [u8]) {
                if let Some(d) = out.get_mut(..$n) { d.copy_from_slice(&self.to_le_bytes()); }
            }
        }
        impl FieldType for $t {
            const SIZE: usize = $n;
            const ALIGN: usize = $n;
            type Out<'a> = $t;
            type In<'x> = $t;
            type Ret<'c, S: Storage + 'c> = ();
            #[inline]
            fn read<'a>(s: &StructReader<'a>, off: usize, _: &'static str) -> $t {
                <$t>::from_le_bytes(s.scalar::<$n>(off))
            }
            #[inline]
            fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: $t) {
                b.set_scalar::<$n>(off, v.to_le_bytes());
            }
        }
    )*};
}
scalar!(u8 = 1, i8 = 1, u16 = 2, i16 = 2, u32 = 4, i32 = 4, u64 = 8, i64 = 8, f32 = 4, f64 = 8);

impl Scalar for bool {
    const WIDTH: usize = 1;
    fn read_le(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|b| *b != 0)
    }
    fn write_le(self, out: &mut [u8]) {
        if let Some(b) = out.first_mut() {
            *b = self as u8;
        }
    }
}

impl FieldType for bool {
    const SIZE: usize = 1;
    const ALIGN: usize = 1;
    type Out<'a> = bool;
    type In<'x> = bool;
    type Ret<'c, S: Storage + 'c> = ();
    fn read<'a>(s: &StructReader<'a>, off: usize, _: &'static str) -> bool {
        s.scalar::<1>(off)[0] != 0
    }
    fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: bool) {
        b.set_scalar::<1>(off, [v as u8]);
    }
}

/// A fixed-size byte array stored inline in the struct.
impl<const N: usize> FieldType for [u8; N] {
    const SIZE: usize = N;
    const ALIGN: usize = 1;
    type Out<'a> = &'a [u8; N];
    type In<'x> = &'x [u8; N];
    type Ret<'c, S: Storage + 'c> = ();
    #[inline]
    fn read<'a>(s: &StructReader<'a>, off: usize, _: &'static str) -> &'a [u8; N] {
        s.array::<N>(off)
    }
    #[inline]
    fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: &[u8; N]) {
        b.set_array(off, v);
    }
}

/// UTF-8 text behind a `{rel, len}` slot. Reads validate; a null pointer reads as "".
pub struct Text;
/// Raw bytes behind a `{rel, len}` slot. A null pointer reads as an empty slice.
pub struct Bytes;
/// A list of scalars behind a `{rel, len}` slot; `len` counts elements.
pub struct List<T>(PhantomData<T>);
/// A nested struct behind a 4-byte self-relative pointer.
pub struct Ptr<T>(PhantomData<T>);

impl FieldType for Text {
    const SIZE: usize = 8;
    const ALIGN: usize = 4;
    type Out<'a> = Result<&'a str, Error>;
    type In<'x> = &'x str;
    type Ret<'c, S: Storage + 'c> = ();
    fn read<'a>(s: &StructReader<'a>, off: usize, field: &'static str) -> Self::Out<'a> {
        s.text(off, field)
    }
    fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: &str) {
        b.set_var(off, v.as_bytes(), 1, v.len());
    }
}

impl FieldType for Bytes {
    const SIZE: usize = 8;
    const ALIGN: usize = 4;
    type Out<'a> = Result<&'a [u8], Error>;
    type In<'x> = &'x [u8];
    type Ret<'c, S: Storage + 'c> = ();
    // PERF: inlined (5 % of the vote's decode as a call).
    #[inline]
    fn read<'a>(s: &StructReader<'a>, off: usize, field: &'static str) -> Self::Out<'a> {
        s.bytes(off, field)
    }
    #[inline]
    fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: &[u8]) {
        b.set_var(off, v, 1, v.len());
    }
}

/// A borrowed list of scalars, decoded element by element on access.
#[derive(Clone, Copy, Debug)]
pub struct ListReader<'a, T> {
    data: &'a [u8],
    _t: PhantomData<T>,
}

impl<'a, T: Scalar> ListReader<'a, T> {
    pub fn len(&self) -> usize {
        self.data.len() / T::WIDTH
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<T> {
        self.data.get(i * T::WIDTH..(i + 1) * T::WIDTH).map(T::read_le)
    }
    pub fn iter(&self) -> impl Iterator<Item = T> + 'a {
        self.data.chunks_exact(T::WIDTH).map(T::read_le)
    }
    /// The raw little-endian bytes of the list.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }
}

impl<T: Scalar> FieldType for List<T> {
    const SIZE: usize = 8;
    const ALIGN: usize = 4;
    type Out<'a> = Result<ListReader<'a, T>, Error>;
    type In<'x> = &'x [T];
    type Ret<'c, S: Storage + 'c> = ();
    fn read<'a>(s: &StructReader<'a>, off: usize, field: &'static str) -> Self::Out<'a> {
        let data = match s.slot_range(off, T::WIDTH, field)? {
            Some((start, len)) => s.message_bytes().get(start..start + len).unwrap_or(&[]),
            None => &[],
        };
        Ok(ListReader { data, _t: PhantomData })
    }
    fn write<S: Storage>(b: &mut StructBuilder<'_, S>, off: usize, v: &[T]) {
        b.set_list_with(off, T::WIDTH, v.len(), |dst| {
            for (x, out) in v.iter().zip(dst.chunks_exact_mut(T::WIDTH)) {
                x.write_le(out);
            }
        });
    }
}

impl<T: Schema> FieldType for Ptr<T> {
    const SIZE: usize = 4;
    const ALIGN: usize = 4;
    type Out<'a> = Result<Option<T::Reader<'a>>, Error>;
    /// The setter takes nothing and returns a builder for the new child.
    type In<'x> = ();
    type Ret<'c, S: Storage + 'c> = T::Builder<'c, S>;
    fn read<'a>(s: &StructReader<'a>, off: usize, _: &'static str) -> Self::Out<'a> {
        Ok(s.child(off, T::NAME, T::SIZE)?.map(T::reader))
    }
    fn write<'c, S: Storage>(b: &'c mut StructBuilder<'_, S>, off: usize, _: ()) -> T::Builder<'c, S> {
        T::builder(b.child(off, T::SIZE))
    }
}

/// Rounds `n` up to a multiple of `align` (a power of two), usable in consts.
pub const fn align_up(n: usize, align: usize) -> usize {
    (n + align - 1) & !(align - 1)
}

/// Declares a ZAP struct: a marker type carrying the layout (one associated
/// `const` per field holding its offset, plus `SIZE`), a reader and a builder.
///
/// Fields are laid out in declaration order, each aligned to its own size;
/// the struct size is rounded up to 8.
///
/// ```
/// zap::zap_struct! {
///     /// A point with a label.
///     pub struct Point / PointReader / PointBuilder {
///         x: i32,
///         y: i32,
///         label: zap::Text,
///     }
/// }
/// assert_eq!((Point::x, Point::y, Point::label, Point::SIZE), (0, 4, 8, 16));
/// let mut b = zap::Builder::new();
/// let mut p = b.root::<Point>();
/// p.x(3);
/// p.label("origin");
/// let bytes = p.finish().unwrap().to_vec();
/// let r = zap::read::<Point>(&bytes).unwrap();
/// assert_eq!((r.x(), r.y(), r.label().unwrap()), (3, 0, "origin"));
/// ```
#[macro_export]
macro_rules! zap_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident / $reader:ident / $builder:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $name;

        /// Field offsets within the fixed section, computed from the declaration.
        #[allow(non_upper_case_globals)]
        impl $name {
            $crate::__zap_offsets!(0usize ; $($field : $ty),*);
        }

        impl $crate::Schema for $name {
            const NAME: &'static str = stringify!($name);
            const SIZE: usize = $name::SIZE;
            const FIELDS: &'static [(usize, usize)] = &[$(($name::$field, <$ty as $crate::FieldType>::SIZE)),*];
            type Reader<'a> = $reader<'a>;
            type Builder<'b, S: $crate::Storage + 'b> = $builder<'b, S>;
            fn reader(s: $crate::StructReader<'_>) -> $reader<'_> {
                $reader { s }
            }
            fn builder<S: $crate::Storage>(s: $crate::StructBuilder<'_, S>) -> $builder<'_, S> {
                $builder { s }
            }
        }

        #[doc = concat!("Zero-copy reader of a `", stringify!($name), "`.")]
        #[derive(Clone, Copy, Debug)]
        $vis struct $reader<'a> {
            s: $crate::StructReader<'a>,
        }

        impl<'a> $reader<'a> {
            $(
                $(#[$fmeta])*
                #[inline]
                pub fn $field(&self) -> <$ty as $crate::FieldType>::Out<'a> {
                    <$ty as $crate::FieldType>::read(&self.s, $name::$field, stringify!($field))
                }
            )*
            /// The untyped view, for unchecked access (e.g. text as raw bytes).
            pub fn as_struct(&self) -> $crate::StructReader<'a> {
                self.s
            }
        }

        #[doc = concat!("Builder of a `", stringify!($name), "`; each setter writes in place.")]
        $vis struct $builder<'b, S: $crate::Storage = Vec<u8>> {
            s: $crate::StructBuilder<'b, S>,
        }

        impl<'b, S: $crate::Storage> $builder<'b, S> {
            $(
                $(#[$fmeta])*
                #[inline]
                pub fn $field(&mut self, v: <$ty as $crate::FieldType>::In<'_>) -> <$ty as $crate::FieldType>::Ret<'_, S> {
                    <$ty as $crate::FieldType>::write(&mut self.s, $name::$field, v)
                }
            )*
            /// Writes the header and returns the finished message.
            #[inline]
            pub fn finish(self) -> Result<&'b [u8], $crate::Error> {
                self.s.finish()
            }
        }
    };
}

/// Internal: computes one offset per field, each after the previous field's end.
#[doc(hidden)]
#[macro_export]
macro_rules! __zap_offsets {
    ($end:expr ;) => {
        /// Size of the fixed section, rounded up to 8.
        pub const SIZE: usize = $crate::schema::align_up($end, 8);
    };
    ($end:expr ; $field:ident : $ty:ty $(, $($rest:tt)*)?) => {
        pub const $field: usize = $crate::schema::align_up($end, <$ty as $crate::FieldType>::ALIGN);
        $crate::__zap_offsets!(Self::$field + <$ty as $crate::FieldType>::SIZE ; $($($rest)*)?);
    };
}
