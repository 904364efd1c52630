//! Reversibility errors: what the generated checks report.

use core::fmt;

/// Where a check failed: the reversible function, the user's statement as written, and whether
/// the function was running backwards (`uncall`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// The reversible function.
    pub function: &'static str,
    /// The statement, as written in the function's source.
    pub statement: &'static str,
    /// `true` when the failure happened in `uncall` (the inverse), which runs the statement's
    /// inverse.
    pub backwards: bool,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = if self.backwards { " (running backwards)" } else { "" };
        write!(f, "in `{}`{dir}, statement `{}`", self.function, self.statement)
    }
}

/// A reversibility check failed: the program would not be undone exactly by its inverse.
///
/// Reversible functions return `Result<(), InvertibilityError>`; the error names the function,
/// the statement and the values seen. `@invcheckoff` removes the checks from proven code.
///
/// ```
/// adjoint_rev::reversible! {
///     fn leak(x: &mut f64) {
///         let t = 0.0;
///         t += x.exp();       // never uncomputed
///         unlet t = 0.0;
///     }
/// }
/// let err = leak(&mut 1.0).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "in `leak`, statement `unlet t = 0.0`: ancilla `t` should be 0.0 when deallocated, but is 2.718281828459045"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvertibilityError {
    /// `unlet x = v` found `x ≠ v`.
    Deallocation {
        /// Where.
        site: Site,
        /// The ancilla.
        variable: &'static str,
        /// The value declared in `unlet`.
        expected: String,
        /// The value found.
        found: String,
    },
    /// An `if (pre, post)` whose post-condition disagrees with the pre-condition.
    Condition {
        /// Where.
        site: Site,
        /// The pre-condition (which chose the branch).
        pre: bool,
        /// The post-condition after the branch.
        post: bool,
    },
    /// A `while (pre, post)` whose post-condition is already true on entry.
    LoopEntry {
        /// Where.
        site: Site,
    },
    /// A `while (pre, post)` whose post-condition is false after an iteration.
    LoopIteration {
        /// Where.
        site: Site,
    },
    /// A `for` loop whose bounds changed while it ran.
    Bounds {
        /// Where.
        site: Site,
        /// The bounds (and step) before the loop.
        before: String,
        /// The bounds after the loop.
        after: String,
    },
    /// Two arguments of an instruction or call are the same element.
    Alias {
        /// Where.
        site: Site,
        /// One argument.
        a: &'static str,
        /// The other argument.
        b: &'static str,
    },
}

impl InvertibilityError {
    #[doc(hidden)]
    pub fn deallocation(site: Site, variable: &'static str, expected: String, found: String) -> Self {
        Self::Deallocation { site, variable, expected, found }
    }
    #[doc(hidden)]
    pub fn condition(site: Site, pre: bool, post: bool) -> Self {
        Self::Condition { site, pre, post }
    }
    #[doc(hidden)]
    pub fn loop_entry(site: Site) -> Self {
        Self::LoopEntry { site }
    }
    #[doc(hidden)]
    pub fn loop_iteration(site: Site) -> Self {
        Self::LoopIteration { site }
    }
    #[doc(hidden)]
    pub fn bounds(site: Site, before: String, after: String) -> Self {
        Self::Bounds { site, before, after }
    }

    /// Where the check failed.
    pub fn site(&self) -> &Site {
        match self {
            Self::Deallocation { site, .. }
            | Self::Condition { site, .. }
            | Self::LoopEntry { site }
            | Self::LoopIteration { site }
            | Self::Bounds { site, .. }
            | Self::Alias { site, .. } => site,
        }
    }
}

impl fmt::Display for InvertibilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deallocation { site, variable, expected, found } => {
                write!(f, "{site}: ancilla `{variable}` should be {expected} when deallocated, but is {found}")
            }
            Self::Condition { site, pre, post } => write!(
                f,
                "{site}: the pre-condition was {pre} but the post-condition is {post} after the branch \
                 (they must agree for the branch to be undone)"
            ),
            Self::LoopEntry { site } => {
                write!(f, "{site}: the post-condition is already true before the loop (it must be false on entry)")
            }
            Self::LoopIteration { site } => {
                write!(f, "{site}: the post-condition is false after an iteration (it must be true after every iteration)")
            }
            Self::Bounds { site, before, after } => {
                write!(f, "{site}: the loop's range changed while it ran: {before} before, {after} after")
            }
            Self::Alias { site, a, b } => {
                write!(f, "{site}: `{a}` and `{b}` are the same element; the arguments of a reversible statement must not alias")
            }
        }
    }
}

impl std::error::Error for InvertibilityError {}

/// `unlet`'s check: is the ancilla back to its declared value?
#[doc(hidden)]
#[inline(always)]
pub fn restored<T: PartialEq>(a: &T, b: &T) -> bool {
    a == b
}

/// The run-time alias check for arguments that differ only in an index (`x[i]`, `x[j]`).
#[doc(hidden)]
#[inline(always)]
pub fn distinct(a: *const u8, b: *const u8, site: Site, na: &'static str, nb: &'static str) -> Result<(), InvertibilityError> {
    if core::ptr::eq(a, b) {
        Err(InvertibilityError::Alias { site, a: na, b: nb })
    } else {
        Ok(())
    }
}
