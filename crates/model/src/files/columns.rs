//! Every CSV of a run has its columns from one place: the fields of its row's struct. The
//! header is written from them and rows are serialised in the same order, so a column is
//! added by adding a field (at the end, with a serde default, so an older file without it
//! still loads); nothing else lists the names.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Serialize;

/// One row of a run directory's CSV.
pub trait Row: Serialize + DeserializeOwned {
    /// The file's name in the run directory.
    const FILE: &'static str;
    /// How many of the leading columns every file of this kind has held since the first
    /// format: the loader requires them. The columns after them were added later (each
    /// field with a serde default), so a file written before them still loads.
    const FIRST_COLUMNS: usize;

    /// The columns in order: the struct's fields as serde names them.
    fn columns() -> &'static [&'static str] {
        field_names::<Self>()
    }

    /// The columns a file may lack (added after the first format).
    fn added_later() -> &'static [&'static str] {
        let columns = Self::columns();
        &columns[Self::FIRST_COLUMNS.min(columns.len())..]
    }
}

/// The field names serde's derive gives a struct, in declaration order (with any
/// `rename`): the derive hands them to `deserialize_struct`, which this deserializer keeps
/// and then stops. Empty for anything that is not a plain struct.
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("only the field names were wanted"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize)]
    struct Example {
        t_s: f64,
        #[serde(rename = "bytes")]
        moved: u64,
        #[serde(default)]
        later: Option<u32>,
    }

    impl Row for Example {
        const FILE: &'static str = "example.csv";
        const FIRST_COLUMNS: usize = 2;
    }

    #[test]
    fn the_columns_are_the_fields_as_serde_names_them() {
        assert_eq!(Example::columns(), ["t_s", "bytes", "later"]);
        assert_eq!(Example::added_later(), ["later"]);
        assert!(field_names::<u32>().is_empty());
    }
}
