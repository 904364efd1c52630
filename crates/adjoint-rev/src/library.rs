//! Library
