//! Serialization: JSON text ([`json`]) and the JSON-graph format of object graphs ([`graph`]).

pub mod graph;
pub mod json;

pub use graph::{from_json_graph, from_json_graph_string, to_json_graph, to_json_graph_string};
