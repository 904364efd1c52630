//! The error type of building and running array programs.

/// What can go wrong when an array program is built or run.
///
/// Build-time errors (shapes, misuse of handles) are recorded by the [`Builder`](crate::Builder)
/// when they happen and returned by [`Builder::build`](crate::Builder::build); run-time errors
/// (input sizes, out-of-bounds indices) are returned by [`Program::run`](crate::Program::run) and
/// [`Program::gradient_a`](crate::Program::gradient_a).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// Two arrays that must agree in shape do not.
    #[error("shape mismatch in {combinator}: {left:?} vs {right:?}")]
    ShapeMismatch {
        /// The combinator that was being built (`zip_with`, `acond`, …).
        combinator: &'static str,
        /// The first shape.
        left: Vec<usize>,
        /// The second shape.
        right: Vec<usize>,
    },
    /// A combinator met arrays (or expressions) of different element types; convert one with
    /// [`Acc::cast_f32`](crate::Acc::cast_f32) / [`Acc::cast_f64`](crate::Acc::cast_f64).
    #[error(
        "element type mismatch in {combinator}: {left} vs {right} (convert one with cast_f32() \
         or cast_f64())"
    )]
    DTypeMismatch {
        /// The combinator that was being built (`zip_with`, `map`, `acond`, …).
        combinator: &'static str,
        /// The first element type.
        left: crate::DType,
        /// The second element type.
        right: crate::DType,
    },
    /// The data passed for an input is not of its declared element type.
    #[error(
        "input {index}: declared {expected}, got {got} data (pass f32 data with Input::F32 to \
         run_typed/gradient_typed)"
    )]
    InputType {
        /// Which input.
        index: usize,
        /// Its declared element type.
        expected: crate::DType,
        /// The type of the data given.
        got: crate::DType,
    },
    /// An index outside an array (in indexing, `backpermute` or `permute`).
    #[error(
        "index {} out of bounds for shape {shape:?} in {context}",
        show_index(index)
    )]
    OutOfBounds {
        /// The offending index, one entry per axis (NaN, shown `_`, for an axis the error
        /// does not fix: a `slice`'s `Sl::All`, or a component computed at run time beside a
        /// constant one that is out of range).
        index: Vec<f64>,
        /// The shape of the array indexed.
        shape: Vec<usize>,
        /// Where: `indexing`, `permute`, …
        context: &'static str,
    },
    /// `gradient_a` needs a program whose one output is a scalar (shape `[]`).
    #[error(
        "gradient_a needs a program with one scalar output (shape []), got outputs of shapes {0:?}"
    )]
    NonScalarOutput(Vec<Vec<usize>>),
    /// The inputs passed to `run` do not match the declared inputs.
    #[error("input {index}: expected {expected} elements (shape {shape:?}), got {got}")]
    InputSize {
        /// Which input.
        index: usize,
        /// Its declared shape.
        shape: Vec<usize>,
        /// Elements expected.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// The wrong number of inputs was passed to `run`.
    #[error("expected {expected} inputs, got {got}")]
    InputCount {
        /// Declared inputs.
        expected: usize,
        /// Given inputs.
        got: usize,
    },
    /// A seed passed to `vjp` (the cotangent of one output) does not have its output's size.
    #[error("seed {index} (for output {index}): expected {expected} elements (the output's shape {shape:?}), got {got}")]
    SeedSize {
        /// Which seed (= which output).
        index: usize,
        /// The output's shape.
        shape: Vec<usize>,
        /// Elements expected.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// The wrong number of seeds was passed to `vjp`: one per output.
    #[error("expected {expected} seeds (one per output), got {got}")]
    SeedCount {
        /// The program's outputs.
        expected: usize,
        /// Seeds given.
        got: usize,
    },
    /// A malformed program: an array or expression used outside its program or closure, a bad
    /// axis or slice specification, an unsupported derivative.
    #[error("{0}")]
    Invalid(String),
}

/// `Result<T, Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// An index as the user wrote it: whole numbers without `.0`, `_` for an axis left open (NaN:
/// it showed as `[NaN, 3.0]`, read as a computed NaN index; a hunter).
fn show_index(index: &[f64]) -> String {
    let parts: Vec<String> = index
        .iter()
        .map(|v| {
            if v.is_nan() {
                "_".into()
            } else if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}
