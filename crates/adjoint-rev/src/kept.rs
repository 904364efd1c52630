//! `Kept`: the stack on which a gradient pass keeps routine values for its inverse half.

use core::any::{type_name, TypeId};
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use std::cell::Cell;

use crate::Ancilla;

/// Values a gradient pass (`f::gradient_pass_unchecked`) keeps for its inverse half: the
/// ancillas of each function whose routine it did not uncompute, taken back by the mirrored
/// uncall instead of recomputing the routine (the checkpointing NiLang does with its stack).
/// Generated code pushes and pops in mirror order; a value comes back only as the type it was
/// pushed as (anything else panics), so no misuse reads one type as another.
///
/// ```
/// use adjoint_rev::Kept;
/// let mut kept = Kept::default();
/// kept.push(1.5f64);
/// kept.push([1u8, 2, 3]);
/// assert_eq!(kept.pop::<[u8; 3]>(), [1, 2, 3]);
/// assert_eq!(kept.pop::<f64>(), 1.5);
/// assert!(kept.is_empty());
/// ```
///
/// A value still on the stack when it is dropped (a pass that stopped at an error) is leaked,
/// not dropped. A stack stays on the thread that made it (it is neither `Send` nor `Sync`): the
/// values it holds need not be `Send`.
///
/// ```compile_fail
/// fn send<S: Send>(_: S) {}
/// send(adjoint_rev::Kept::default());
/// ```
#[derive(Default)]
pub struct Kept {
    /// The values, back to back and unaligned: entry `i` holds a value of type `types[i]`.
    bytes: Vec<MaybeUninit<u8>>,
    types: Vec<TypeId>,
    /// Not `Send`/`Sync`: an `Rc` pushed here must be popped on the thread that pushed it.
    _thread: PhantomData<*const ()>,
}

thread_local! {
    /// A stack kept between passes, so a steady-state pass allocates nothing.
    static SPARE: Cell<Kept> = Cell::new(Kept::default());
}

impl Kept {
    /// Keep `v`.
    #[inline]
    pub fn push<X: 'static>(&mut self, v: X) {
        let n = self.bytes.len();
        self.bytes.reserve(size_of::<X>());
        // SAFETY: `reserve` made room for `size_of::<X>()` bytes after the first `n`, so the
        // write stays inside the allocation; `write_unaligned` needs no alignment, and `set_len`
        // covers exactly the bytes written (`MaybeUninit<u8>` needs no initialisation). The
        // value is moved in: it is moved out once, by the `pop` of its entry, or leaked.
        unsafe {
            self.bytes
                .as_mut_ptr()
                .add(n)
                .cast::<X>()
                .write_unaligned(v);
            self.bytes.set_len(n + size_of::<X>());
        }
        self.types.push(TypeId::of::<X>());
    }

    /// Keep `v` without its gradient ([`Ancilla::clear_gradient`]): what a gradient pass's
    /// forward half keeps, where every gradient is zero.
    #[inline]
    pub fn push_cleared<X: Ancilla + 'static>(&mut self, mut v: X) {
        v.clear_gradient();
        self.push(v);
    }

    /// Take back the value kept last, which must be an `X`.
    ///
    /// # Panics
    /// If the stack is empty or its last value is not an `X`: the inverse half of a pass did
    /// not mirror its forward half (unchecked code whose `while` conditions do not hold
    /// backwards can do that).
    #[inline]
    pub fn pop<X: 'static>(&mut self) -> X {
        match self.types.last() {
            Some(t) if *t == TypeId::of::<X>() => {}
            found => {
                panic!(
                "adjoint_rev: a gradient pass's inverse took back a `{}` where its forward pass \
                 kept {} (the inverse did not mirror the forward pass: are the conditions of a \
                 `while` or `if` in unchecked code true backwards?)",
                type_name::<X>(),
                if found.is_some() { "a value of another type" } else { "nothing" }
            )
            }
        }
        self.types.pop();
        let n = self.bytes.len() - size_of::<X>();
        // SAFETY: the entries' bytes lie back to back, and the last entry is an `X` (its
        // `TypeId` was just checked), so its value occupies the last `size_of::<X>()` bytes,
        // written by `push` and not read since. It is read once and its bytes dropped from the
        // stack, so the value is moved out exactly once.
        unsafe {
            let v = self.bytes.as_ptr().add(n).cast::<X>().read_unaligned();
            self.bytes.set_len(n);
            v
        }
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// This thread's spare stack (empty; its buffers reused between passes).
    pub fn take() -> Kept {
        SPARE.with(Cell::take)
    }

    /// Return a stack for the next [`take`](Self::take) on this thread (what is left on it is
    /// leaked).
    pub fn give_back(mut self) {
        self.bytes.clear();
        self.types.clear();
        SPARE.with(|s| s.set(self));
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn values_come_back_in_reverse_order_as_their_own_types() {
        let mut k = Kept::default();
        k.push(1.25f64);
        k.push(7u8); // odd sizes: the next value lies unaligned
        k.push([3.5f64, -0.0, f64::NAN]);
        k.push(vec![1.0f32, 2.0]); // owns heap memory: moved in and out once
        k.push(());
        k.push((2u16, -5i64));
        assert_eq!(k.pop::<(u16, i64)>(), (2, -5));
        k.pop::<()>();
        assert_eq!(k.pop::<Vec<f32>>(), vec![1.0, 2.0]);
        let a = k.pop::<[f64; 3]>();
        assert_eq!(
            (a[0], a[1].to_bits(), a[2].is_nan()),
            (3.5, (-0.0f64).to_bits(), true)
        );
        assert_eq!(k.pop::<u8>(), 7);
        assert_eq!(k.pop::<f64>(), 1.25);
        assert!(k.is_empty());
    }

    #[test]
    #[should_panic(
        expected = "took back a `f32` where its forward pass kept a value of another type"
    )]
    fn a_value_never_comes_back_as_another_type() {
        let mut k = Kept::default();
        k.push(1.0f64);
        k.pop::<f32>();
    }

    #[test]
    #[should_panic(expected = "kept nothing")]
    fn an_empty_stack_gives_nothing_back() {
        Kept::default().pop::<f64>();
    }

    #[test]
    fn a_spare_stack_comes_back_empty() {
        let mut k = Kept::take();
        k.push(vec![1u32]); // left over: leaked, not reused
        k.push(2.0f64);
        k.give_back();
        let k = Kept::take();
        assert!(k.is_empty());
        k.give_back();
    }
}
