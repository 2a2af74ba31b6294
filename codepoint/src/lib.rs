//! Protocol code points as enums that keep what they do not know.
//!
//! [`enum_with_unknown!`] declares a `Copy` enum over an integer type with
//! one variant per named value and an `Unknown(n)` catch-all, so that a
//! parse followed by an emit gives back the same octets (STYLE §4, after
//! smoltcp's `src/macros.rs`). It is the one definition the protocol crates
//! share; this crate has no dependencies and no code of its own.

/// Declares a `Copy` enum over an integer with an `Unknown` catch-all.
///
/// ```
/// codepoint::enum_with_unknown! {
///     /// ARP operations (RFC 826).
///     pub enum Operation(u16) {
///         /// A request.
///         Request = 1,
///         /// A reply.
///         Reply = 2,
///     }
/// }
///
/// assert_eq!(Operation::from(2), Operation::Reply);
/// assert_eq!(Operation::from(9), Operation::Unknown(9));
/// assert_eq!(u16::from(Operation::Unknown(9)), 9);
/// ```
///
/// The enum derives `Debug`, `Clone`, `Copy`, `PartialEq`, `Eq`, `Hash`,
/// `PartialOrd` and `Ord`, and converts both ways with `From`. When the
/// *calling* crate is built with a feature named `arbitrary` (and depends
/// on the `arbitrary` crate), it also implements `arbitrary::Arbitrary`,
/// built from the integer so that `Unknown(known value)`, which would not
/// survive a round trip, is never produced.
#[macro_export]
macro_rules! enum_with_unknown {
    (
        $(#[$meta:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A code point without a name here; kept so it round-trips.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }

        #[cfg(feature = "arbitrary")]
        impl<'a> arbitrary::Arbitrary<'a> for $name {
            fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
                Ok(Self::from(<$ty as arbitrary::Arbitrary<'a>>::arbitrary(u)?))
            }
        }
    };
}

// This crate has no `arbitrary` feature: the macro's cfg is meant for the
// calling crate.
#[cfg(test)]
#[allow(unexpected_cfgs)]
mod tests {
    enum_with_unknown! {
        /// A test registry.
        pub enum Kind(u8) {
            /// One.
            One = 1,
            /// Two.
            Two = 2,
        }
    }

    #[test]
    fn round_trips_every_value() {
        for n in 0..=u8::MAX {
            assert_eq!(u8::from(Kind::from(n)), n);
        }
        assert_eq!(Kind::from(1), Kind::One);
        assert_eq!(Kind::from(3), Kind::Unknown(3));
    }

    #[test]
    fn orders_by_declaration_then_unknown() {
        assert!(Kind::One < Kind::Two);
        assert!(Kind::Two < Kind::Unknown(0));
    }
}
