//! Array engine of adjoint (work in progress): whole-program reverse AD of a data-parallel array
//! language in the style of Accelerate (seed 004).
