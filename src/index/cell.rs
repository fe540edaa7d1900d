//! Where in the ESE grid a search runs: a [`Cell`], the encoder's first `layers` layers and the
//! first `dim` dimensions of their embedding. And why an index cannot answer at the cell asked
//! for, as data: the library does not know whether the asker typed a flag or sent a JSON field,
//! so each front end words the refusal with its own name for the quantity (`--layers`,
//! `` `layers` ``) and, where its user can rebuild the index, adds the rebuild that would work.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A depth and size resolved against an index: it stores vectors at `layers`, at least `dim`
/// wide. (The default, 0 x 0, is no cell: the paragraphs were given, not searched.)
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Cell {
    pub layers: usize,
    pub dim: usize,
}

impl Cell {
    pub fn new(layers: usize, dim: usize) -> Self {
        Self { layers, dim }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "layers {}, dim {}", self.layers, self.dim)
    }
}

/// A depth or size the index cannot search at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellRefusal {
    /// A depth the model does not have: no index of this model can store it.
    LayersOutsideModel {
        layers: usize,
        model_layers: usize,
        model: String,
        stored: Vec<usize>,
    },
    /// A depth of the model that this index does not store.
    LayersNotStored { layers: usize, stored: Vec<usize> },
    /// A size outside 1..=the stored width.
    DimOutsideStored {
        dim: usize,
        stored_dim: usize,
        /// The model's width: up to it, a rebuild with `--dim` stores more.
        model_dim: usize,
        /// How the stored vectors were reduced, if they were (then no rebuild with `--dim`
        /// helps).
        reduced_with: Option<String>,
    },
}

impl CellRefusal {
    /// The refusal in words, `field` naming each quantity (`layers`, `dim`) as the asker sets it.
    pub fn describe(&self, field: impl Fn(&str) -> String) -> String {
        match self {
            Self::LayersOutsideModel {
                layers,
                model_layers,
                model,
                stored,
            } => format!(
                "{} {layers} is outside 1..={model_layers}, the depths of {model} (the index stores {})",
                field("layers"),
                join(stored)
            ),
            Self::LayersNotStored { layers, stored } => format!(
                "the index has no vectors for {} {layers} (it stores {})",
                field("layers"),
                join(stored)
            ),
            Self::DimOutsideStored {
                dim,
                stored_dim,
                reduced_with: Some(method),
                ..
            } => format!(
                "{} {dim} is outside 1..={stored_dim} for this index (its vectors were reduced with {method})",
                field("dim")
            ),
            Self::DimOutsideStored {
                dim, stored_dim, ..
            } => format!(
                "{} {dim} is outside 1..={stored_dim} for this index (it stores {stored_dim} dimensions)",
                field("dim")
            ),
        }
    }

    /// The `rag index` flags that would build an index answering this (`None`: none would).
    pub fn rebuild_flags(&self) -> Option<String> {
        match self {
            Self::LayersOutsideModel { .. } => None,
            Self::LayersNotStored { layers, stored } => Some(format!(
                "--layers {}",
                join(&[stored.clone(), vec![*layers]].concat())
            )),
            Self::DimOutsideStored {
                dim,
                stored_dim,
                model_dim,
                reduced_with: None,
            } if dim > stored_dim && dim <= model_dim => Some(format!("--dim {dim}")),
            Self::DimOutsideStored { .. } => None,
        }
    }
}

/// Plain names, for a caller that has none of its own (a front end words it itself).
impl fmt::Display for CellRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(str::to_owned))
    }
}

impl std::error::Error for CellRefusal {}

/// Depths as a sorted list without repeats: `1,3,6`.
pub fn join(values: &[usize]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.dedup();
    sorted
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
