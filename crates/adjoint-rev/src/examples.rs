//! Examples
