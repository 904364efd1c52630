//! Checkpointing: trade recomputation for tape memory in a user-marked region.

use crate::record::{check_value, with_state, with_state_mut, BadValue, Checkpoint, Label, State};
use crate::var::Var;
use crate::Tape;
use std::sync::Arc;

/// A checkpointed region's body.
pub(crate) type RegionFn = Arc<dyn Fn(&[Var]) -> Vec<Var> + Send + Sync>;

/// Run `f(inputs)` without recording it; in the reverse pass, run it again on a fresh tape and
/// backpropagate through it there. The tape then holds only the region's outputs, so a loop of
/// `T` checkpointed steps needs memory for one step's tape at a time instead of `T`.
///
/// Gradients equal the un-checkpointed program's, bit for bit when the region uses scalar
/// operations only; a slice primitive (`vector::matvec`, `dot`, …) may add its terms in
/// another order when its operands are consecutive values in one program and not in the other
/// (the region's outputs are consecutive leaves), which changes the last bits. Two more cases
/// sum an adjoint's terms in another order, equal to rounding but not always bit for bit: the
/// same active value passed twice in `inputs` (its repeats' adjoints are added afterwards), and
/// an output that is an input handed back unchanged (that output's adjoint is added to the
/// input's after the region's sweep). In checked mode
/// a non-finite output of the region from finite inputs is reported as the region's
/// (`checkpoint`), and so is a NaN or infinity the region makes inside and does not hand out
/// (`Ln inside a checkpointed region`, at the region's first output): checked mode records each
/// outermost region once more, whole, to look for it (regions nested in it are recorded inline
/// then), so a checked recording holds one such region's tape at a time. Every active value the
/// region reads must come in through `inputs` (a captured active `Var` is a panic with a message
/// saying so); `f` must be deterministic. Outside a recording this is just `f(inputs)`.
///
/// `f` must be `'static`: the reverse pass calls it again after the recording closure has
/// returned, when locals it borrowed would be gone, so a closure that borrows the caller's data
/// is rejected at compile time:
///
/// ```compile_fail
/// use adjoint_tape::{checkpoint, grad, Var};
/// let weights = vec![0.5, -0.25];
/// let g = grad(|x: &[Var]| checkpoint(x, |s| vec![s[0] * weights[0]])[0], &[1.0, 2.0]);
/// ```
///
/// Move in what it reads — a clone, or an `Arc` for large data:
///
/// ```
/// use adjoint_tape::{checkpoint, grad, Var};
/// use std::sync::Arc;
///
/// let weights = Arc::new(vec![0.5, -0.25]);
/// let g = grad(|x: &[Var]| {
///     let w = Arc::clone(&weights);
///     let out = checkpoint(x, move |s| vec![s[0] * w[0] + s[1] * w[1]]);
///     out[0].sin()
/// }, &[1.0, 2.0]);
/// assert!((g[0] - 0.5 * 0.0f64.cos()).abs() < 1e-15);
/// ```
///
/// ```
/// use adjoint_tape::{checkpoint, grad, Var};
///
/// fn step(s: &[Var]) -> Vec<Var> {
///     vec![s[0] + s[1] * 0.1, s[1] - s[0].sin() * 0.1]
/// }
/// let run = |x: &[Var], ckpt: bool| {
///     let mut s = x.to_vec();
///     for _ in 0..100 {
///         s = if ckpt { checkpoint(&s, step) } else { step(&s) };
///     }
///     s[0] * s[1]
/// };
/// let plain = grad(|x: &[Var]| run(x, false), &[0.3, 0.1]);
/// let saved = grad(|x: &[Var]| run(x, true), &[0.3, 0.1]);
/// assert_eq!(plain, saved);
/// ```
pub fn checkpoint<F>(inputs: &[Var], f: F) -> Vec<Var>
where
    F: Fn(&[Var]) -> Vec<Var> + Send + Sync + 'static,
{
    let inline = with_state_mut(|s| match s {
        State::Recording(ctx) => ctx.session.inline_checkpoints,
        _ => true,
    });
    if inline {
        // Not recording; or recording a region whole to check it, where the regions inside it
        // are recorded inline.
        return f(inputs);
    }
    let consts: Vec<Var> = inputs.iter().map(|v| Var::constant(v.v)).collect();
    let (outs, _) = with_state(State::Checkpointing, || f(&consts));
    // The region runs on constants, so what it computes is constant: an active output is a
    // captured `Var` handed back as it is (no operation on it, which would have panicked).
    if let Some(&v) = outs.iter().find(|o| !o.is_constant()) {
        crate::record::captured_by_checkpoint(v);
    }
    // Checked mode: operations on constants are not checked, so a non-finite value the region
    // makes and drops (`x.max(ln(−1))`) went unreported. Record the region once, checked, for
    // the first one (only while this job has none yet: a later one would not be reported).
    let check = with_state_mut(|s| match s {
        State::Recording(ctx) => {
            let (job, session) = ctx.parts();
            session.checked && job.first_bad.is_none()
        }
        _ => unreachable!("checked above"),
    });
    let inside = if check {
        first_bad_inside(&f, inputs)
    } else {
        None
    };
    with_state_mut(|s| {
        let State::Recording(ctx) = s else {
            unreachable!("checked above")
        };
        let (job, session) = ctx.parts();
        let inputs: Vec<(Option<u32>, f64)> = inputs
            .iter()
            .map(|&v| {
                let slot = (!v.is_constant()).then(|| job.local(v, session));
                (slot, v.v)
            })
            .collect();
        let start = job.len();
        if let Some(e) = inside {
            // At the region's first output, as the reverse pass reports what the region's
            // recomputation finds.
            job.first_bad = Some(e.into_checkpoint(job.idx, start));
        }
        let checked = session.checked;
        // In checked mode the region is one primitive: a non-finite output from finite inputs
        // is reported like any operation's (its operands: the region's first two inputs).
        let finite_inputs = inputs.iter().all(|&(_, v)| v.is_finite());
        let shown = [0, 1].map(|i| inputs.get(i).map_or(0.0, |&(_, v)| v));
        let vars: Vec<Var> = outs
            .iter()
            .map(|o| {
                let seq = job.push_leaf(checked);
                if checked && finite_inputs {
                    check_value(job, Label::Vector("checkpoint"), shown, o.v, seq);
                }
                job.var(o.v, seq)
            })
            .collect();
        job.checkpoints.push(Checkpoint {
            start,
            end: start + vars.len() as u32,
            inputs,
            f: Arc::new(f),
        });
        vars
    })
}

/// The reverse pass of a checkpoint: recompute on a fresh tape whose input adjoints start at the
/// outer adjoints (so additions happen in the same order as without the checkpoint), seed the
/// outputs, sweep, and write the input adjoints back.
///
/// `checked`: the recomputation is checked too, and a non-finite contribution its reverse pass
/// finds is returned as the region's (job `job`, at the region's first output).
pub(crate) fn reverse(
    cp: &Checkpoint,
    adj: &mut [f64],
    checked: bool,
    job: u16,
) -> Result<(), BadValue> {
    // One recycled tape per thread (a fresh one only when checkpoints nest).
    let mut tape = RECOMPUTE.with_borrow_mut(Option::take).unwrap_or_default();
    tape.set_checked(checked);
    let x: Vec<f64> = cp.inputs.iter().map(|(_, v)| *v).collect();
    let active: Vec<bool> = cp.inputs.iter().map(|(s, _)| s.is_some()).collect();
    // A slot passed twice starts from the outer adjoint once; its repeats start from 0 and are
    // added (correct, though then not bit-identical to the un-checkpointed order).
    let mut seen: Vec<u32> = Vec::new();
    let repeat: Vec<bool> = cp
        .inputs
        .iter()
        .map(|(s, _)| match s {
            Some(s) if seen.contains(s) => true,
            Some(s) => {
                seen.push(*s);
                false
            }
            None => false,
        })
        .collect();
    let init: Vec<f64> = cp
        .inputs
        .iter()
        .zip(&repeat)
        .map(|((s, _), &rep)| match s {
            Some(s) if !rep => adj[*s as usize],
            _ => 0.0,
        })
        .collect();
    let f = cp.f.clone();
    let outs = tape.record(&x, Some(&active), |xs| f(xs));
    let first = (cp.end - cp.start) as usize;
    assert!(
        outs.len() == first,
        "adjoint::tape: a checkpointed region returned {first} values when recorded and {} when \
         recomputed for the reverse pass: its function must compute the same thing from the same \
         inputs every time (no state it changes, no randomness)",
        outs.len()
    );
    let seeds: Vec<(Var, f64)> = outs
        .iter()
        .enumerate()
        .map(|(i, &o)| (o, adj[cp.start as usize + i]))
        .collect();
    let mut g = vec![0.0; x.len()];
    if let Err(e) = tape.reverse(&seeds, Some(&init), &mut g) {
        RECOMPUTE.with_borrow_mut(|t| *t = Some(tape));
        return Err(e.into_checkpoint(job, cp.start));
    }
    for (((slot, _), gi), rep) in cp.inputs.iter().zip(g).zip(repeat) {
        match slot {
            Some(s) if rep => adj[*s as usize] += gi,
            Some(s) => adj[*s as usize] = gi,
            None => {}
        }
    }
    RECOMPUTE.with_borrow_mut(|t| *t = Some(tape));
    Ok(())
}

/// Record `f` at `inputs`' values on a checked tape and return the first non-finite value it
/// makes from finite operands (checked mode's look inside a region; see [`checkpoint`]).
#[cold]
#[inline(never)]
fn first_bad_inside<F>(f: &F, inputs: &[Var]) -> Option<crate::NonFinite>
where
    F: Fn(&[Var]) -> Vec<Var>,
{
    let mut tape = RECOMPUTE.with_borrow_mut(Option::take).unwrap_or_default();
    tape.set_checked(true);
    // Nested regions inline: a property of this recording (its session), not of this thread,
    // which may run other recordings' work while it waits in a `join` inside the region.
    tape.set_inline_checkpoints(true);
    let x: Vec<f64> = inputs.iter().map(|v| v.v).collect();
    let active: Vec<bool> = inputs.iter().map(|v| !v.is_constant()).collect();
    tape.record(&x, Some(&active), |xs| {
        f(xs);
    });
    tape.set_inline_checkpoints(false);
    let bad = tape.forward_error().err();
    RECOMPUTE.with_borrow_mut(|t| *t = Some(tape));
    bad
}

thread_local! {
    /// The tape checkpointed regions are recomputed on, kept between regions and calls.
    static RECOMPUTE: std::cell::RefCell<Option<Tape>> = const { std::cell::RefCell::new(None) };
}
