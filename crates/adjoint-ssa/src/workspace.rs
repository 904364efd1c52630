//! Typed stacks and the reusable workspace of the generated pullbacks.

use std::cell::RefCell;

/// A typed LIFO stack backed by a `Vec` that keeps its capacity across calls.
#[derive(Clone, Debug, Default)]
pub struct Stack<T> {
    items: Vec<T>,
}

impl<T> Stack<T> {
    /// An empty stack.
    pub const fn new() -> Self {
        Stack { items: Vec::new() }
    }
    /// Push a value.
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        self.items.push(v);
    }
    /// Pop the last value pushed.
    ///
    /// # Panics
    /// On an empty stack (a pullback's pops always match its pushes).
    #[inline(always)]
    pub fn pop(&mut self) -> T {
        match self.items.pop() {
            Some(v) => v,
            None => underflow(),
        }
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// No values.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Allocated capacity.
    pub fn capacity(&self) -> usize {
        self.items.capacity()
    }
    /// Remove every value, keeping the memory.
    pub fn clear(&mut self) {
        self.items.clear();
    }
}

impl<T: Copy> Stack<T> {
    /// A cursor for fast pushes and pops: it keeps pointer, length and capacity in locals (so in
    /// registers) and writes the length back on [`Cursor::commit`]. The generated pullbacks use
    /// one cursor per stack for each sweep.
    #[inline(always)]
    pub fn cursor(&mut self) -> Cursor<'_, T> {
        Cursor {
            ptr: self.items.as_mut_ptr(),
            len: self.items.len(),
            cap: self.items.capacity(),
            stack: self,
        }
    }
}

/// A stack borrowed for fast pushes and pops (see [`Stack::cursor`]). Values pushed through it
/// become visible in the stack at [`Cursor::commit`]. Dropping it without committing is safe
/// (the elements are `Copy` and every element below the stack's length is initialised) but
/// leaves the stack at its length before the cursor, or at the length of the last growth.
pub struct Cursor<'a, T> {
    ptr: *mut T,
    len: usize,
    cap: usize,
    stack: &'a mut Stack<T>,
}

impl<T: Copy> Cursor<'_, T> {
    /// Push a value.
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        if self.len == self.cap {
            let (ptr, cap) = grow(self.stack, self.len);
            self.ptr = ptr;
            self.cap = cap;
        }
        // SAFETY: len < cap, and ptr is the buffer of `stack` with capacity cap (it is only
        // replaced together with cap by `grow`, which reallocates that same vector).
        unsafe { self.ptr.add(self.len).write(v) };
        self.len += 1;
    }

    /// Make room for `n` more values (then [`Cursor::push_reserved`] needs no reallocation).
    #[inline(always)]
    pub fn reserve(&mut self, n: usize) {
        if self.cap - self.len < n {
            let (ptr, cap) = grow_by(self.stack, self.len, n);
            self.ptr = ptr;
            self.cap = cap;
        }
    }

    /// Push a value into room made by [`Cursor::reserve`]: the full-stack path diverges
    /// instead of reallocating, so no value has to live across a call (loops stay in registers).
    ///
    /// # Panics
    /// When the room reserved is exhausted (a code-generation bug).
    #[inline(always)]
    pub fn push_reserved(&mut self, v: T) {
        if self.len == self.cap {
            overflow();
        }
        // SAFETY: as in `push`: len < cap and ptr is the buffer of capacity cap.
        unsafe { self.ptr.add(self.len).write(v) };
        self.len += 1;
    }

    /// Pop the last value.
    ///
    /// # Panics
    /// On an empty stack.
    #[inline(always)]
    pub fn pop(&mut self) -> T {
        if self.len == 0 {
            underflow();
        }
        self.len -= 1;
        // SAFETY: every index below len was initialised: below the length the stack had when
        // the cursor was made, by the vector; above it, by `push`.
        unsafe { self.ptr.add(self.len).read() }
    }

    /// Number of values.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No values.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write the length back to the stack.
    #[inline(always)]
    pub fn commit(self) {
        // SAFETY: len <= cap = the vector's capacity; all elements below len are initialised.
        unsafe { self.stack.items.set_len(self.len) };
    }
}

/// Make room for one more element after the first `len` (which are initialised); returns the
/// new buffer and capacity.
#[cold]
#[inline(never)]
fn grow<T: Copy>(stack: &mut Stack<T>, len: usize) -> (*mut T, usize) {
    // SAFETY: the cursor initialised every element below len, and len <= capacity.
    unsafe { stack.items.set_len(len) };
    stack.items.reserve(len.max(64));
    (stack.items.as_mut_ptr(), stack.items.capacity())
}

/// Make room for `n` more elements after the first `len`; returns the new buffer and capacity.
#[cold]
#[inline(never)]
fn grow_by<T: Copy>(stack: &mut Stack<T>, len: usize, n: usize) -> (*mut T, usize) {
    // SAFETY: the cursor initialised every element below len, and len <= capacity.
    unsafe { stack.items.set_len(len) };
    stack.items.reserve(n.max(64));
    (stack.items.as_mut_ptr(), stack.items.capacity())
}

#[cold]
#[inline(never)]
fn overflow() -> ! {
    panic!("adjoint_ssa: a pullback pushed more than the room it reserved")
}

#[cold]
#[inline(never)]
fn underflow() -> ! {
    panic!("adjoint_ssa: stack underflow (a workspace was shared between interleaved pullbacks)")
}

/// The stacks a pullback records on: active values (`T`), passive floats, integers and bools,
/// and branch tags. Nested pullbacks (calls to other differentiable functions) share it; each
/// pops exactly what it pushed. Reuse one workspace across calls: it is cleared, not freed, so a
/// steady-state call allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct Workspace<T> {
    /// Active values.
    pub reals: Stack<T>,
    /// Passive floats.
    pub floats: Stack<f64>,
    /// Integers and bools (as `u64`).
    pub ints: Stack<u64>,
    /// Which incoming edge a block in a loop was entered by.
    pub tags: Stack<u32>,
}

impl<T> Workspace<T> {
    /// An empty workspace.
    pub const fn new() -> Self {
        Workspace {
            reals: Stack::new(),
            floats: Stack::new(),
            ints: Stack::new(),
            tags: Stack::new(),
        }
    }
    /// Empty every stack, keeping the memory.
    pub fn clear(&mut self) {
        self.reals.clear();
        self.floats.clear();
        self.ints.clear();
        self.tags.clear();
    }
    /// Bytes currently reserved by the stacks.
    pub fn capacity_bytes(&self) -> usize {
        self.reals.capacity() * std::mem::size_of::<T>()
            + self.floats.capacity() * 8
            + self.ints.capacity() * 8
            + self.tags.capacity() * 4
    }
}

thread_local! {
    static WORKSPACE: RefCell<Workspace<f64>> = const { RefCell::new(Workspace::new()) };
}

/// Run `f` with this thread's `f64` workspace (used by the generated `grad`). A re-entrant call
/// (a `grad` inside a user rule, say) gets a fresh workspace instead.
pub fn with_workspace<R>(f: impl FnOnce(&mut Workspace<f64>) -> R) -> R {
    WORKSPACE.with(|w| match w.try_borrow_mut() {
        Ok(mut ws) => f(&mut ws),
        Err(_) => f(&mut Workspace::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_pushes_pops_and_grows_like_a_vec() {
        let mut s: Stack<u64> = Stack::new();
        s.push(7);
        let mut reference = vec![7u64];
        let mut c = s.cursor();
        // Growth from a non-empty stack, several times over.
        for i in 0..1000 {
            c.push(i);
            reference.push(i);
        }
        // Pop part of it (across the growth points), push again, reserve and push reserved.
        for _ in 0..600 {
            assert_eq!(c.pop(), reference.pop().unwrap());
        }
        c.reserve(300);
        for i in 0..300 {
            c.push_reserved(10_000 + i);
            reference.push(10_000 + i);
        }
        c.push(42);
        reference.push(42);
        assert_eq!(c.len(), reference.len());
        c.commit();
        assert_eq!(s.len(), reference.len());
        let mut c = s.cursor();
        while let Some(want) = reference.pop() {
            assert_eq!(c.pop(), want);
        }
        assert!(c.is_empty());
        c.commit();
        assert!(s.is_empty());
    }

    #[test]
    fn dropping_a_cursor_without_commit_keeps_an_initialised_stack() {
        let mut s: Stack<u32> = Stack::new();
        for i in 0..10 {
            s.push(i);
        }
        {
            let mut c = s.cursor();
            for i in 0..5000 {
                c.push(i); // grows: the stack's length is set to the cursor's at each growth
            }
        }
        // Whatever length it kept, every element is readable and the first ten are intact.
        let n = s.len();
        assert!((10..=5010).contains(&n));
        let mut popped = Vec::new();
        while !s.is_empty() {
            popped.push(s.pop());
        }
        assert_eq!(
            &popped[popped.len() - 10..],
            &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
        );
    }

    #[test]
    #[should_panic(expected = "stack underflow")]
    fn popping_an_empty_cursor_panics() {
        let mut s: Stack<f64> = Stack::new();
        s.cursor().pop();
    }
}
