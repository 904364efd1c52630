//! Pooled scratch buffers for calls that pass a passive `f64` slice to another
//! `#[differentiable]` function, whose `primal`/`pullback` take `&[T]` and a `&mut [A]` adjoint
//! buffer for it: the values are lifted to `T` (not copied where `T` is `f64`), and the
//! adjoint, which nothing reads, goes to a zeroed scratch buffer. The buffers come from a
//! per-thread pool and go back to it when dropped, so a steady-state call allocates nothing.

// `Box<Vec<E>>` on purpose: the pool holds `Box<dyn Any>`, and keeping each buffer in its box
// moves it in and out of the pool without allocating.
#![allow(clippy::box_collection)]

use adjoint_core::Real;
use std::any::Any;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

thread_local! {
    /// Free buffers, each a `Vec<E>` for some element type `E`.
    static POOL: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `E`s taken from the thread's pool (given back on drop).
pub struct Scratch<E: 'static> {
    buf: Option<Box<Vec<E>>>,
}

impl<E: Copy + 'static> Scratch<E> {
    /// `n` copies of `e`.
    pub fn filled(n: usize, e: E) -> Self {
        let mut buf = take::<E>();
        buf.clear();
        buf.resize(n, e);
        Scratch { buf: Some(buf) }
    }
}

fn take<E: 'static>() -> Box<Vec<E>> {
    let found = POOL
        .try_with(|p| {
            let mut p = p.borrow_mut();
            let k = p.iter().position(|b| b.is::<Vec<E>>())?;
            p.swap_remove(k).downcast::<Vec<E>>().ok()
        })
        .ok()
        .flatten();
    found.unwrap_or_default()
}

impl<E: 'static> Drop for Scratch<E> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            let b: Box<dyn Any> = b;
            // at thread exit the pool may be gone: then the buffer is freed
            let _ = POOL.try_with(|p| p.borrow_mut().push(b));
        }
    }
}

impl<E: 'static> Deref for Scratch<E> {
    type Target = [E];
    fn deref(&self) -> &[E] {
        self.buf.as_deref().map_or(&[], |v| v.as_slice())
    }
}

impl<E: 'static> DerefMut for Scratch<E> {
    fn deref_mut(&mut self) -> &mut [E] {
        self.buf
            .as_deref_mut()
            .map_or(&mut [], |v| v.as_mut_slice())
    }
}

/// `x` as `&[T]`: itself where `T` is `f64`, else its values lifted into a pooled buffer.
pub enum Lifted<'a, T: 'static> {
    /// `T` is `f64`.
    Same(&'a [T]),
    /// Lifted copies.
    Copied(Scratch<T>),
}

/// Lift a passive `f64` slice to `T`.
pub fn lift<T: Real + 'static>(x: &[f64]) -> Lifted<'_, T> {
    match T::f64_slice_as_self(x) {
        Some(same) => Lifted::Same(same),
        None => {
            let mut s = Scratch::filled(x.len(), T::cst(0.0));
            for (d, &v) in s.iter_mut().zip(x) {
                *d = T::cst(v);
            }
            Lifted::Copied(s)
        }
    }
}

impl<T: 'static> Deref for Lifted<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Lifted::Same(x) => x,
            Lifted::Copied(s) => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adjoint_core::forward::Dual;

    #[test]
    fn lifting_borrows_for_f64_and_copies_otherwise() {
        let x = [1.0, 2.5, -3.0];
        let same = lift::<f64>(&x);
        assert!(matches!(same, Lifted::Same(_)));
        assert_eq!(same.as_ptr(), x.as_ptr());
        let dual = lift::<Dual<f64>>(&x);
        assert!(matches!(dual, Lifted::Copied(_)));
        assert_eq!(dual.iter().map(|d| d.re).collect::<Vec<_>>(), x);
        assert!(dual.iter().all(|d| d.eps == 0.0));
    }

    #[test]
    fn buffers_are_reused_and_nested_ones_are_distinct() {
        let p = {
            let a = Scratch::filled(8, 1.5f64);
            assert_eq!(&a[..], &[1.5; 8]);
            a.as_ptr()
        };
        let mut a = Scratch::filled(4, 0.0f64);
        assert_eq!(a.as_ptr(), p, "the dropped buffer is taken again");
        let b = Scratch::filled(4, 2.0f64);
        assert_ne!(
            b.as_ptr(),
            a.as_ptr(),
            "a buffer in use is not handed out twice"
        );
        a[0] = 7.0;
        assert_eq!((&a[..], &b[..]), (&[7.0, 0.0, 0.0, 0.0][..], &[2.0; 4][..]));
        // another element type gets its own buffer
        let c = Scratch::filled(3, 1u8);
        assert_eq!(&c[..], &[1, 1, 1]);
    }
}
