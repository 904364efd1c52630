//! Unit tests of the macro's logic, without macro expansion.

use super::*;
use quote::quote;

fn err(input: TokenStream) -> String {
    match try_expand(input, &quote!(::adjoint_rev)) {
        Ok(ts) => panic!("expected an error, got {ts}"),
        Err(e) => e.to_string(),
    }
}

fn ok(input: TokenStream) -> String {
    match try_expand(input, &quote!(::adjoint_rev)) {
        Ok(ts) => ts.to_string(),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn generates_function_inverse_and_reversible_impl() {
    let s = ok(quote! { fn m<T: Arith>(y: &mut T, a: &mut T, b: &mut T) { y += a * b; } });
    assert!(s.contains("fn m"));
    assert!(s.contains("fn uncall"));
    assert!(s.contains("Reversible"));
    // The forward adds, the inverse subtracts.
    let fwd = &s[..s.find("fn uncall").unwrap()];
    let inv = &s[s.find("fn uncall").unwrap()..];
    assert!(fwd.contains("Op2 :: Mul") && fwd.contains("true"));
    assert!(inv.contains("Op2 :: Mul") && inv.contains("false"));
}

#[test]
fn target_in_arguments_is_an_error() {
    let e = err(quote! { fn f(y: &mut f64, x: &mut f64) { y += y * x; } });
    assert!(e.contains("both the target and an argument"), "{e}");
    let e = err(quote! { fn f(z: &mut C) { z.re += z.re.sin(); } });
    assert!(e.contains("both the target"), "{e}");
}

#[test]
fn built_in_instructions_write_places_only() {
    // Written into a copy, SWAP's old value of `y` would be lost (an inverse that does not
    // restore): a constant, a literal or a loop variable where an instruction writes is an error.
    let e = err(quote! { fn f(y: &mut f64) { SWAP(y, 1.0); } });
    assert!(e.contains("`SWAP` writes its argument `1.0`"), "{e}");
    let e = err(quote! { fn f(v: &mut Vec<i64>) { for i in 0..3 { SWAP(v[0], i as i64); } } });
    assert!(e.contains("`SWAP` writes its argument `i as i64`"), "{e}");
    let e = err(quote! { fn f(y: &mut f64) { NEG(2.0); } });
    assert!(e.contains("`NEG` writes its argument `2.0`"), "{e}");
    // what they only read may be a constant: ROT's angle, ROTL's amount
    ok(quote! { fn f(a: &mut f64, b: &mut f64) { ROT(a, b, 0.5); } });
    ok(quote! { fn f(a: &mut u64) { ROTL(a, 3); } });
}

#[test]
fn distinct_fields_do_not_alias() {
    ok(quote! { fn f(z: &mut C) { z.re += z.im.sin(); } });
}

#[test]
fn aliased_call_arguments_are_an_error() {
    let e = err(quote! { fn f(y: &mut f64, x: &mut f64) { g(y, x, x); } });
    assert!(e.contains("passed twice"), "{e}");
}

#[test]
fn nested_calls_are_an_error() {
    let e = err(quote! { fn f(z: &mut f64, x: &mut f64) { z += sin(cos(x)); } });
    assert!(e.contains("nested expression"), "{e}");
    let e = err(quote! { fn f(z: &mut f64, x: &mut f64, w: &mut f64) { z += x * w * x; } });
    assert!(e.contains("nested expression"), "{e}");
}

#[test]
fn constants_are_not_nested_calls() {
    ok(
        quote! { fn f<T: RevReal>(z: &mut T, x: &mut T) { z += x * T::from_f64(2.0); z += x * 3.0; } },
    );
}

#[test]
fn ancilla_errors() {
    let e = err(quote! { fn f(x: &mut f64) { let a = 0.0; let a = 0.0; unlet a = 0.0; } });
    assert!(e.contains("re-allocation of live ancilla `a`"), "{e}");
    // A loop's variable is not an ancilla (it was called one; a hunter).
    let e = err(quote! { fn f(x: &mut f64) { for i in 0..3 { let i = 0.0; unlet i = 0.0; } } });
    assert!(
        e.contains("`i` is the variable of an enclosing `for` loop; an ancilla needs a new name"),
        "{e}"
    );
    let e = err(quote! { fn f(x: &mut f64) { let a = 0.0; unlet a = 0.0; x += a; } });
    assert!(e.contains("use of deallocated ancilla `a`"), "{e}");
    let e = err(quote! { fn f(x: &mut f64) { let a = 0.0; a += x; } });
    assert!(e.contains("never deallocated"), "{e}");
    let e = err(quote! { fn f(x: &mut f64) { unlet x = 0.0; } });
    assert!(e.contains("parameter"), "{e}");
    let e = err(quote! { fn f(x: &mut f64) { if (x > 0.0, ~) { let a = 1.0; } } });
    assert!(e.contains("never deallocated"), "{e}");
}

#[test]
fn a_loop_variable_named_as_a_parameter_is_an_error() {
    // (rustc's "type `usize` cannot be dereferenced" at `v[k]`, inside the body; a hunter)
    let e = err(quote! {
        fn f(y: &mut f64, v: &mut Vec<f64>, k: &mut usize) { for k in 0..v.len() { y += v[k]; } }
    });
    assert!(
        e.contains("`k` is a parameter; a `for` loop's variable needs a new name"),
        "{e}"
    );
    ok(quote! { fn f(y: &mut f64, v: &mut Vec<f64>) { for k in 0..v.len() { y += v[k]; } } });
}

#[test]
fn a_loop_variable_may_shadow_a_live_ancilla_but_is_no_local_of_a_routine() {
    // A live ancilla may be shadowed by a loop's variable, as any local (a reviewer: it ran
    // before, and undid) …
    ok(quote! {
        fn f(y: &mut f64, v: &mut Vec<f64>) {
            let a = 0usize; for a in 0..v.len() { y += v[a]; } unlet a = 0usize;
        }
    });
    // … but the routine analyses took the ancilla `u`, written after the loop, for the loop's
    // local, and unchecked code skipped uncomputing the routine: `y` came out 1.0, not 0.5 (a
    // hunter; `tests/routine_skipping.rs` runs it).
    let s = ok(quote! {
        fn f<T: RevReal>(y: &mut T, x: &mut T) {
            let u = T::zero();
            @routine { for u in 0..1 { } u += x; }
            y += u;
            ~@routine;
            unlet u = T::zero();
        }
    });
    assert!(!s.contains("no_gradient"), "{s}");
    // The analyses themselves: the write to `u` after the loop is a write to a non-ancilla, so
    // the routine may not be skipped, fused or kept.
    let funcs: parse::Funcs = syn::parse2(quote! {
        fn f<T: RevReal>(y: &mut T, x: &mut T) {
            let u = T::zero();
            for u in 0..1 { }
            u += x;
        }
    })
    .unwrap();
    let body = lower::expand(funcs.0.into_iter().next().unwrap().body).unwrap();
    let params = ["y".to_string(), "x".to_string()];
    assert!(codegen::fusable(&body[1..], &params).is_none());
    assert!(codegen::keep_plan(&body[1..], &params).is_none());
    // (without the shadowing loop, the write to `u` counts as a write to a non-ancilla too)
    assert!(codegen::fusable(&body[2..], &params).is_none());
}

#[test]
fn routines_expand_to_compute_and_uncompute() {
    ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; n += x.abs(); }
            y += n.ln();
            ~@routine;
        }
    });
    let e = err(quote! { fn f(y: &mut f64) { ~@routine; } });
    assert!(e.contains("without a `@routine"), "{e}");
    // An uncomputation alone without checks: refused, naming the form that works (it said no
    // routine came before it; a hunter).
    let e = err(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine a { let n = 0.0; n += x.abs(); }
            y += n;
            @invcheckoff ~@routine a;
        }
    });
    assert!(
        e.contains(
            "`@invcheckoff ~@routine a`: an uncomputation takes its checks from its routine"
        ) && e.contains("`@invcheckoff @routine a { … }`"),
        "{e}"
    );
    ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @invcheckoff @routine { let n = 0.0; n += x.abs(); }
            y += n;
            ~@routine;
        }
    });
    // Named routines (seed 000): undone by name, in any order.
    ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine a { let s = 0.0; s += x.sin(); }
            @routine b { let c = 0.0; c += x.cos(); }
            y += s * c;
            ~@routine a;
            ~@routine b;
        }
    });
    let e = err(quote! { fn f(y: &mut f64) { @routine a { let s = 0.0; } ~@routine b; } });
    assert!(e.contains("`~@routine b` without"), "{e}");
}

#[test]
fn misuse_errors() {
    assert!(err(quote! { fn f(y: &mut f64) { y = 1.0; } }).contains("plain assignment"));
    assert!(err(quote! { fn f(y: f64) { } }).contains("&mut"));
    assert!(err(quote! { fn f(y: &mut f64) -> f64 { } }).contains("returns nothing"));
    assert!(
        err(quote! { fn f(y: &mut f64) { while y < 3.0 { y += 1.0; } } })
            .contains("post-condition")
    );
    assert!(err(
        quote! { fn f(y: &mut f64, v: &mut Vec<f64>) { for i in v.iter() { y += 1.0; } } }
    )
    .contains("range"));
    assert!(
        err(quote! { fn f(y: &mut f64, x: &mut f64) { y += foo(x); } })
            .contains("not an instruction")
    );
    assert!(err(quote! { fn f(y: &mut f64) { @bogus y += 1.0; } }).contains("unknown `@`"));
}

#[test]
fn inversion_follows_table_one() {
    // Inverting twice is the identity (compared through the generated text).
    let src = quote! {
        fn f(y: &mut f64, x: &mut f64, v: &mut Vec<f64>) {
            let t = 0.0;
            t += x.exp();
            if (t > 1.0, ~) { y += t * x; } else { y -= t; }
            for i in (0..3).rev() { v[i] += t.sin(); }
            while (t > 0.0 && false, t < -1.0) { t -= 1.0; }
            SWAP(y, x);
            t -= x.exp();
            unlet t = 0.0;
        }
    };
    let funcs: parse::Funcs = syn::parse2(src).unwrap();
    let body = lower::expand(funcs.0.into_iter().next().unwrap().body).unwrap();
    let k = quote!(::k);
    let text = |stmts: &[ir::Stmt]| {
        codegen::Gen {
            krate: &k,
            fname: "f".into(),
            params: vec![],
            backwards: false,
            keep: false,
            counter: Cell::new(0),
            at: Cell::new(proc_macro2::Span::call_site()),
        }
        .stmts(stmts, true)
        .to_string()
    };
    assert_eq!(text(&body), text(&invert(&invert(&body))));
    assert_ne!(text(&body), text(&invert(&body)));
}

#[test]
fn unchecked_forward_may_skip_passive_uncomputation_only() {
    // Call-free routine writing its own ancillas: the unchecked forward guards the
    // uncomputation with the ancillas' passivity, and so does the unchecked inverse (its last
    // uncomputation, of the routine it computed first); the checked code never does.
    let s = ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; n += x.exp(); }
            y += n.ln();
            ~@routine;
        }
    });
    // The guard is a call to the runtime's `no_gradient`.
    let guard = ":: no_gradient (";
    // (outside the twins a gradient pass runs: `__call_keep` has the guard too; the gradient
    // pass's inverse half, which takes back what the routine's calls kept, has none)
    let main = |s: &str| s[..s.find("fn __call_keep").unwrap()].to_string();
    assert_eq!(main(&s).matches(guard).count(), 1, "{s}");
    let unchecked =
        &s[s.find("fn call_unchecked").unwrap()..s.find("fn uncall_unchecked").unwrap()];
    assert!(unchecked.contains(guard));
    // (the inverse's guard: that the ancillas are plain numbers, a constant)
    let inverse_guard = ":: passive (";
    assert_eq!(s.matches(inverse_guard).count(), 1, "{s}");
    let uncall_unchecked = &s[s.find("fn uncall_unchecked").unwrap()..];
    let uncall_unchecked = &uncall_unchecked[..uncall_unchecked[3..].find(" fn ").unwrap()];
    assert!(
        uncall_unchecked.contains(inverse_guard),
        "{uncall_unchecked}"
    );
    // A routine that calls another function: guarded also by the callee's `__WRITES` for the
    // non-ancillas it passes (`x`), not for its ancillas (`n`).
    let s = ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; g(n, x); }
            y += n.ln();
            ~@routine;
        }
    });
    assert_eq!(main(&s).matches(guard).count(), 1, "{s}");
    assert!(s.contains("! g :: __WRITES3 [1usize]"), "{s}");
    assert!(!s.contains("__WRITES3 [0usize]"), "{s}");
    // `__WRITES`: `y` is a target; `x` is passed to a call: at level 0 counted as written
    // whatever `g` does, at level l as `g`'s level l − 1 says (no constant depends on its own
    // level, so recursion makes no cycle)
    assert!(
        s.contains("__WRITES : [bool ; 2usize] = [true , true]"),
        "{s}"
    );
    assert!(
        s.contains("__WRITES1 : [bool ; 2usize] = [true , (g :: __WRITES [1usize])]"),
        "{s}"
    );
    assert!(
        s.contains("__WRITES3 : [bool ; 2usize] = [true , (g :: __WRITES2 [1usize])]"),
        "{s}"
    );
    let r = ok(quote! { fn h(y: &mut f64, x: &mut f64) { y += x.exp(); } });
    assert!(
        r.contains("__WRITES : [bool ; 2usize] = [true , false]"),
        "{r}"
    );
    // A routine that runs `@safe` code, or writes a parameter, is always uncomputed.
    let s = ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; @safe println!("{}", n); }
            y += n.ln();
            ~@routine;
        }
    });
    assert!(!s.contains(guard));
    let s = ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { x += 1.0; }
            y += x.ln();
            ~@routine;
        }
    });
    assert!(!s.contains(guard));
}

#[test]
fn one_place_may_be_read_twice_but_not_be_the_target() {
    // Statically the same place: the `_same` instruction, one load.
    let s = ok(quote! { fn f<T: RevReal>(y: &mut T, x: &mut T) { y += x * x; y += x.hypot(x); } });
    assert!(s.contains("acc_arith_same"), "{s}");
    assert!(s.contains("acc2_same"), "{s}");
    assert!(!s.contains("distinct"), "{s}");
    // Maybe the same place (`i == j`): decided at run time.
    let s = ok(
        quote! { fn f<T: Arith>(y: &mut T, v: &mut Vec<T>, i: &mut usize, j: &mut usize) { y += v[i] * v[j]; } },
    );
    assert!(
        s.contains(":: same (") && s.contains("acc_arith_same") && s.contains("acc_arith ("),
        "{s}"
    );
    // The target among the arguments: refused, in either slot.
    let e = err(quote! { fn f(y: &mut f64, x: &mut f64) { y += x * y; } });
    assert!(e.contains("both the target"), "{e}");
    let e = err(quote! { fn f(v: &mut Vec<f64>, i: &mut usize) { v[i] += v[i] * v[i]; } });
    assert!(e.contains("both the target"), "{e}");
}

#[test]
fn alias_checks_stay_in_unchecked_code() {
    let s = ok(quote! {
        fn f(v: &mut Vec<f64>, i: &mut usize, j: &mut usize) {
            v[i] += v[j].sin();
            SWAP(v[i], v[j]);
        }
    });
    let unchecked = &s[s.find("fn call_unchecked").unwrap()..];
    // Twice in each of the four unchecked functions (the two a gradient pass runs among them),
    // and of the two checked ones.
    assert_eq!(unchecked.matches(":: distinct (").count(), 8, "{s}");
    assert_eq!(s.matches(":: distinct (").count(), 12, "{s}");
}

#[test]
fn literals_keep_their_type_and_every_digit() {
    let s = ok(
        quote! { fn f(c: &mut u64, x: &mut u64) { c += 0x9E37_79B9_7F4A_7C15u64; c -= x * 7; } },
    );
    assert!(
        s.contains("lit :: < u64 , false , 11400714819323198485u128 , 0u128 , false , false >"),
        "{s}"
    );
    assert!(s.contains("lit :: < _ , false , 7u128"), "{s}");
    assert!(!s.contains("from_f64"), "{s}");
    let s = ok(quote! { fn f(c: &mut f64) { c += -0.5; } });
    assert!(
        s.contains("lit :: < _ , true , 0u128 , 170141183460469231731687303715884105728u128 , false , true > (- 0.5f64 , 0.5f32)"),
        "{s}"
    );
    let e = err(quote! { fn f(c: &mut u64) { c += 3u7; } });
    assert!(e.contains("unknown literal suffix"), "{e}");
}

#[test]
fn statements_are_quoted_as_written() {
    let s = ok(quote! {
        fn f<T: Arith>(x: &mut T, v: &mut Vec<T>) {
            let t: Vec<T> = Vec::<T>::new();
            unlet t: Vec<T> = Vec::<T>::new();
            let u = T::zero();
            unlet u = T::zero();
            if (x > -10, ~) { v[0] += x.abs(); }
            @safe println!("{}", v.len());
        }
    });
    for text in [
        "\"unlet t: Vec<T> = Vec::<T>::new()\"",
        "\"unlet u = T::zero()\"",
        "\"if (x > -10, ~)\"",
    ] {
        assert!(s.contains(text), "{text} in {s}");
    }
    assert_eq!(
        parse::pretty(&quote!(a.b[i] * (c - -1.5))),
        "a.b[i] * (c - -1.5)"
    );
    assert_eq!(
        parse::pretty(&quote!(f(x, &mut y[0..=n]))),
        "f(x, &mut y[0..=n])"
    );
    assert_eq!(parse::pretty(&quote!(!a && b < c)), "!a && b < c");
}

#[test]
fn while_with_tilde_post_is_an_error() {
    let e = err(quote! { fn f(x: &mut f64) { while (x < 100.0, ~) { x *= 2.0; } } });
    assert!(e.contains("explicit post-condition"), "{e}");
    assert!(e.contains("while (x < 100.0, post)"), "{e}");
}

#[test]
fn ancilla_hints_are_type_neutral() {
    let e = err(quote! { fn f(z: &mut u64, x: &mut u64, w: &mut u64) { z += x * w * x; } });
    assert!(
        e.contains("ancilla of the operands' type") && e.contains("T::zero()"),
        "{e}"
    );
    assert!(!e.contains("`let t = 0.0; t +="), "{e}");
    let e = err(quote! { fn f(y: &mut u64, x: &mut u64) { y += y * x; } });
    assert!(
        e.contains("ancilla of its type") && e.contains("T::zero()"),
        "{e}"
    );
}

#[test]
fn every_error_is_reported() {
    let e = match try_expand(
        quote! {
            fn f(y: &mut f64, x: &mut f64, z: &mut f64) {
                y += y * x;
                while (x < 1.0, ~) { x += 1.0; }
                if (x > 0.0, ~) { z = x; } else { z += foo(x); }
                z += x;
            }
            fn g(y: &mut f64) { let t = 0.0; t += y.exp(); }
        },
        &quote!(::adjoint_rev),
    ) {
        Ok(ts) => panic!("expected errors, got {ts}"),
        Err(e) => e,
    };
    let msgs: Vec<String> = e.into_iter().map(|e| e.to_string()).collect();
    assert_eq!(msgs.len(), 5, "{msgs:#?}");
    assert!(msgs[0].contains("both the target"), "{msgs:#?}");
    assert!(msgs[1].contains("explicit post-condition"), "{msgs:#?}");
    assert!(msgs[2].contains("plain assignment"), "{msgs:#?}");
    assert!(msgs[3].contains("not an instruction"), "{msgs:#?}");
    assert!(msgs[4].contains("never deallocated"), "{msgs:#?}");
}

#[test]
fn a_body_ending_with_its_uncomputation_gets_a_gradient_pass() {
    let s = ok(quote! {
        fn f(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; n += x.exp(); }
            y += n.ln();
            ~@routine;
        }
    });
    let pass = &s[s.find("fn gradient_pass_unchecked").expect("generated")..];
    // the seed between the two halves, with the arguments reborrowed
    assert!(pass.contains("seed (& mut * y , & mut * x)"), "{pass}");
    // the routine's one computation (`n += exp x` forward) and one uncomputation (backwards)
    let end = pass.find("fn __call_keep").expect("keeping twin");
    assert_eq!(pass[..end].matches("Op1 :: Exp").count(), 2, "{pass}");
    let s = ok(quote! {
        fn g(y: &mut f64, x: &mut f64) {
            @routine { let n = 0.0; n += x.exp(); }
            y += n.ln();
            ~@routine;
            y += x.sin();
        }
    });
    assert!(!s.contains("gradient_pass_unchecked"), "{s}");
}

#[test]
fn a_gradient_pass_keeps_what_its_callees_routines_compute() {
    let s = ok(quote! {
        fn f<T: RevReal>(y: &mut T, x: &mut T) {
            @routine {
                let n = T::zero();
                g(n, x);
                ~h(n, x);
            }
            y += n.ln();
            ~@routine;
        }
    });
    let pass = &s[s.find("fn gradient_pass_unchecked").expect("generated")..];
    let pass = &pass[..pass.find("fn __call_keep").expect("keeping twin")];
    let seed = pass.find("seed (").expect("seed");
    let (fwd, inv) = (&pass[..seed], &pass[seed..]);
    // the forward call keeps g's routine values, and its mirror takes them back; the uncall
    // written as such keeps nothing, nor does its mirror
    assert!(
        fwd.contains("g :: __call_keep (& mut n , & mut (* x) , & mut * __rev_kept)"),
        "{fwd}"
    );
    assert!(
        fwd.contains("h :: uncall_unchecked (& mut n , & mut (* x))"),
        "{fwd}"
    );
    assert!(
        inv.contains("g :: __uncall_kept (& mut n , & mut (* x) , & mut * __rev_kept)"),
        "{inv}"
    );
    assert!(
        inv.contains("h :: call_unchecked (& mut n , & mut (* x))"),
        "{inv}"
    );
    assert!(!pass.contains("g :: uncall_unchecked"), "{pass}");
    // `f`'s keeping twin keeps `n` (without its gradient) when `g` and `h` leave `x` alone
    // (constants), and its inverse twin takes `n` back, typed by its initial value; otherwise
    // they run `f` and its inverse, the routine's calls keeping nothing
    let twin = &s[s.find("fn __call_keep").unwrap()..];
    let cond = "if ! g :: __WRITES3 [1usize] && ! h :: __WRITES3 [1usize] {";
    assert_eq!(twin.matches(cond).count(), 2, "{twin}");
    assert!(
        twin.contains(":: adjoint_rev :: Kept :: push_cleared (__rev_kept , n) ; } else {"),
        "{twin}"
    );
    let pop =
        format!("let (mut n ,) = {cond} (:: adjoint_rev :: Kept :: pop (__rev_kept) ,) }} else {{");
    assert!(twin.contains(&pop), "{twin}");
    assert!(twin.contains("(n ,) } ;"), "{twin}");
    // otherwise the inverse twin recomputes the routine with plain calls (keeping nothing in
    // an inverse half) and its uncomputation takes back what the routine's calls kept
    let inv_twin = &twin[twin.find("fn __uncall_kept").unwrap()..];
    let recomputed = &inv_twin[inv_twin.find("} else {").unwrap()..];
    assert!(
        recomputed.contains("g :: call_unchecked (& mut n"),
        "{recomputed}"
    );
    assert!(
        recomputed.contains("g :: __uncall_kept (& mut n"),
        "{recomputed}"
    );
    assert!(!recomputed.contains("__call_keep ("), "{recomputed}");
    // a routine that writes an argument is uncomputed, never kept
    let s = ok(quote! {
        fn w<T: RevReal>(y: &mut T, x: &mut T) {
            @routine { x += 1.0; }
            y += x.ln();
            ~@routine;
        }
    });
    let twin = &s[s.find("fn __call_keep").unwrap()..];
    assert!(!twin.contains("Kept :: push"), "{twin}");
}

#[test]
fn marking_pairs_every_push_with_a_pop_in_the_inverse() {
    let src = quote! {
        fn f(y: &mut f64, x: &mut f64) {
            g(y, x);
            @routine { let n = 0.0; g(n, x); ~g(n, x); }
            if (y > 0.0, y > 0.0) { for i in 0..3 { g(y, x); } }
            ~@routine;
            ~g(y, x);
        }
    };
    let funcs: parse::Funcs = syn::parse2(src).unwrap();
    let body = lower::expand(funcs.0.into_iter().next().unwrap().body).unwrap();
    fn count(stmts: &[ir::Stmt], n: &mut [usize; 3]) {
        for s in stmts {
            match &s.kind {
                ir::Kind::Call { keep, .. } => n[*keep as usize] += 1,
                ir::Kind::Uncompute(inv, _) => count(inv, n),
                ir::Kind::Recompute(routine) => count(routine, n),
                ir::Kind::Block(b) | ir::Kind::NoCheck(b) => count(b, n),
                ir::Kind::If { then, els, .. } => {
                    count(then, n);
                    count(els, n);
                }
                ir::Kind::For { body, .. } | ir::Kind::While { body, .. } => count(body, n),
                _ => {}
            }
        }
    }
    let marked = codegen::mark(&body);
    let (mut m, mut i) = ([0; 3], [0; 3]);
    count(&marked, &mut m);
    count(&invert(&marked), &mut i);
    // [No, Push, Pop]: the two g(y, x) and the routine's g(n, x) push; the written ~g(n, x)
    // and ~g(y, x) keep nothing, nor does the uncomputation (its ~g(n, x) and g(n, x)). The
    // inverse swaps pushes and pops (its recomputation keeps nothing either).
    assert_eq!(m, [4, 3, 0], "marked");
    assert_eq!(i, [4, 0, 3], "inverted");
    assert!(count_unmarked(&body));
    fn count_unmarked(stmts: &[ir::Stmt]) -> bool {
        let mut n = [0; 3];
        count(stmts, &mut n);
        n[1] == 0 && n[2] == 0
    }
}

/// An index that reads what an instruction or a call may write would differ when the inverse
/// runs: `i += v[i]` (the inverse subtracted `v[1]`, not `v[0]`), `w[0] += w[w[0]]`, and
/// `bump(v[i], i)` with `bump` changing `i` (the inverse undid another element). Compile
/// errors at the index; indices that read other variables stay allowed.
#[test]
fn indices_that_read_what_a_statement_writes_are_refused() {
    for (input, who) in [
        (
            quote!(
                fn f(v: &mut Vec<usize>, i: &mut usize) {
                    i += v[i];
                }
            ),
            "`i` is written by this instruction",
        ),
        (
            quote!(
                fn f(w: &mut Vec<usize>) {
                    w[0] += w[w[0]];
                }
            ),
            "`w` is written by this instruction",
        ),
        (
            quote!(
                fn f<T: RevReal>(x: &mut Vec<T>, i: &mut usize) {
                    x[x.len() - 1 - i] ^= i;
                }
            ),
            "",
        ),
        (
            quote!(
                fn f(v: &mut Vec<i64>, i: &mut usize) {
                    bump(v[i], i);
                }
            ),
            "`i` is an argument of this call",
        ),
        (
            quote!(
                fn f(v: &mut Vec<i64>, i: &mut usize) {
                    SWAP(v[i], i);
                }
            ),
            "`i` is an argument of this call",
        ),
    ] {
        if who.is_empty() {
            // `x[…]` written, `i` read by the index: allowed
            ok(input);
        } else {
            let e = err(input);
            assert!(e.contains(who), "{e}");
        }
    }
    ok(quote!(
        fn f<T: RevReal>(y: &mut T, x: &mut Vec<T>, i: &mut usize, j: &mut usize) {
            y += x[i] * x[j];
            x[i] += y * x[j];
        }
    ));
}

#[test]
fn for_loops_name_one_variable_over_a_range() {
    let e = err(
        quote! { fn f(y: &mut f64, x: &mut Vec<f64>) { for (i, v) in x.iter().enumerate() { y += v; } } },
    );
    assert!(e.contains("binds one integer name over a range"), "{e}");
    let e = err(quote! { fn f(y: &mut f64, n: &mut usize) { for _ in 0..n { y += 1.0; } } });
    assert!(e.contains("name the loop variable"), "{e}");
    let e = err(quote! { fn f(y: &mut f64, x: &mut Vec<f64>) { for v in x.iter() { y += v; } } });
    assert!(e.contains("runs over a range"), "{e}");
}

#[test]
fn a_reduction_on_the_right_points_at_the_library() {
    let e = err(quote! { fn f(y: &mut f64, x: &mut Vec<f64>) { y += x.iter().sum(); } });
    assert!(e.contains("i_sum(y, x)"), "{e}");
}

/// A call argument computed from the function's variables is passed through `computed_arg`,
/// which only plain numbers pass (a compile error at the argument for `T`, arrays, tuples):
/// `sumsq(y, [a, b])`, `g(y, h(x))`, `g(y, x.clone().clone())` and `g(y, m!(x))` were passed
/// as constants, their gradients silently 0 (a hunter). Arguments over loop variables,
/// read-only data and constants are constants as before. (The compile errors: `tests/ui`.)
#[test]
fn an_argument_computed_from_variables_is_checked_to_be_a_plain_number() {
    let computed = |body: TokenStream| {
        let s = ok(
            quote! { fn f<T: RevReal>(y: &mut T, a: &mut T, v: &mut Vec<T>, n: &mut i64, d: &mut &[f64]) { #body } },
        );
        s.matches("computed_arg").count()
    };
    for body in [
        quote! { sumsq(y, [a, b]); },
        quote! { g(y, h(a)); },
        quote! { g(y, a.clone().clone()); },
        quote! { g(y, m!(a)); },
        quote! { g(y, (a, 1.0)); },
        quote! { g(y, v.len()); },
        quote! { g(y, n - 1); },
        quote! { g(y, a.value()); },
    ] {
        assert!(computed(body.clone()) > 0, "{body}");
    }
    for body in [
        quote! { for i in 0..2 { g(y, i + 1, T::from_f64(d[i]), d.len(), 2.0); } },
        quote! { g(y, a.clone(), v[0].clone(), 3); },
        quote! { g(y, a, v[1]); },
    ] {
        assert_eq!(computed(body.clone()), 0, "{body}");
    }
    // an operand that is a macro naming a variable is a nested expression (it was a constant)
    let e = err(quote! { fn f<T: RevReal>(y: &mut T, a: &mut T) { y += m!(a); } });
    assert!(e.contains("nested expression"), "{e}");
    // a macro's field and method names are not reads: `m!(s.t)` reads `s`, not the ancilla `t`
    ok(quote! { fn f(y: &mut f64, x: &mut f64, s: &mut S) {
        let t = 0.0; unlet t = 0.0;
        if (m!(s.t) > 0.0, ~) { y += x; }
    } });
}

/// Attributes and labels on statements are errors at the attribute or label: a `#[cfg(any())]`
/// on a call was dropped (the call ran), `#[allow(..)]` and doc comments gave "the target of an
/// instruction must be…", labels "expected `;`" (a hunter).
#[test]
fn attributes_and_labels_on_statements_are_errors_at_them() {
    for (body, want) in [
        (
            quote! { #[cfg(any())] g(y, x); },
            "attributes on statements",
        ),
        (
            quote! { #[allow(unused)] y += x; },
            "attributes on statements",
        ),
        (
            quote! { #[doc = " a sum"] y += x; },
            "doc comment on a statement",
        ),
        (
            quote! { #[cfg(any())] if (x > 0.0, ~) { y += x; } },
            "attributes on statements",
        ),
        (quote! { 'a: for i in 0..2 { y += x; } }, "loop labels"),
        (
            quote! { y += x; 'outer: while (x > 0.0, x > 0.0) { y += x; } },
            "loop labels",
        ),
    ] {
        let e = err(quote! { fn f(y: &mut f64, x: &mut f64) { #body } });
        assert!(e.contains(want), "{body}: {e}");
    }
}

/// Every leaked ancilla is reported, with the function's other lifetime errors (only the
/// first, alphabetically, was, and none when another statement had one; a hunter).
#[test]
fn every_leaked_ancilla_is_reported() {
    let e = err(quote! { fn f(y: &mut f64) { let a = 0.0; let b = 0.0; } });
    assert!(e.contains("ancilla `a` is never deallocated"), "{e}");
    let errors = match try_expand(
        quote! { fn f(y: &mut f64) { let a = 0.0; let b = 0.0; let c = 0.0; unlet c = 0.0; y += c; } },
        &quote!(::adjoint_rev),
    ) {
        Err(e) => e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        Ok(_) => panic!("expected errors"),
    };
    for want in [
        "ancilla `a`",
        "ancilla `b`",
        "use of deallocated ancilla `c`",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want}: {errors:?}"
        );
    }
}

/// A computed argument may not read a place the same call may write: `addto(k, k + 1)`'s
/// inverse recomputed `k + 1` from the changed `k` (unchecked code: k went 3 → 7 → −1, and a
/// gradient through `addf(y, x, y.value())` was 0; a new user).
#[test]
fn a_computed_argument_may_not_read_a_place_the_call_writes() {
    let e = err(quote! { fn caller(k: &mut i64) { addto(k, k + 1); } });
    assert!(
        e.contains("`k + 1` is computed from `k`, which this call may change"),
        "{e}"
    );
    let e = err(quote! { fn f<T: RevReal>(y: &mut T, x: &mut T) { addf(y, x, y.value()); } });
    assert!(e.contains("computed from `y`"), "{e}");
    let e = err(quote! { fn f<T: RevReal>(v: &mut Vec<T>, x: &mut T) { g(v[0], x, m!(v[1])); } });
    assert!(e.contains("computed from `v`"), "{e}");
    // reading another variable, or a length (no call changes one), is fine
    ok(quote! { fn f<T: RevReal>(y: &mut T, x: &mut T, n: &mut i64) { g(y, x, n + 1); } });
    ok(quote! { fn f<T: RevReal>(v: &mut Vec<T>, x: &mut T) { g(v[0], x, v.len() - 1); } });
    // but the length of a value computed from a changed place is a value (a hunter: wrong
    // numbers in unchecked code), and an index inside a length's receiver is read
    let e = err(quote! { fn f<T: RevReal>(v: &mut Vec<T>) {
        rep(v, v.iter().filter(|e| e.value() > 0.0).count());
        rep(v, v.iter().collect::<Vec<_>>().len());
    } });
    assert!(e.contains("computed from `v`"), "{e}");
    let e = err(quote! { fn f(n: &mut usize, m: &mut Vec<Vec<f64>>) { g(n, (0..n).len()); } });
    assert!(e.contains("computed from `n`"), "{e}");
    let e = err(quote! { fn f(i: &mut usize, m: &mut Vec<Vec<f64>>) { g(i, m[i].len()); } });
    assert!(e.contains("`i` is an argument of this call"), "{e}");
    // place by place: another field of the same variable is not changed by the call
    ok(quote! { fn f<T: RevReal>(s: &mut (T, i32)) { addk(s.0, s.1 + 1); } });
    let e = err(
        quote! { fn f<T: RevReal>(v: &mut Vec<T>, j: &mut usize) { addc(v[0], v[j].value()); } },
    );
    assert!(e.contains("computed from `v[j]`"), "{e}");
}

#[test]
fn fields_of_one_element_are_borrowed_through_one_borrow_of_it() {
    // `v[i + 1].0`, `v[i + 1].1`: never the same storage, so not copied (their type need not be
    // `Copy`); the element is borrowed once, its index computed once, before the borrow.
    let s = ok(quote! {
        fn f<T: RevReal>(v: &mut Vec<(Vec<T>, Vec<T>)>, i: &mut usize) {
            g(v[i + 1].0, v[i + 1].1);
        }
    });
    let fwd = &s[s.find("fn f").unwrap()..s.find("fn uncall").unwrap()];
    assert!(
        !fwd.contains("shared_arg") && !fwd.contains("distinct"),
        "{fwd}"
    );
    assert_eq!(fwd.matches("(* i) + 1").count(), 1, "{fwd}");
    assert!(fwd.contains("= & mut (* v) [__rev_"), "{fwd}");
    assert!(
        fwd.contains(". 0 , & mut __rev_") && fwd.contains(". 1) ?"),
        "{fwd}"
    );
    // beside them, two numbers of a third field that may be the same element are copied in and
    // out after the run-time check; fields of fields share a second borrow
    let s = ok(quote! {
        fn f<T: RevReal>(v: &mut Vec<((Vec<T>, Vec<T>), Vec<T>, Vec<T>)>, i: &mut usize, k: &mut usize) {
            g(v[i].0.0, v[i].0.1, v[i].1, v[i].2[0], v[i].2[k]);
        }
    });
    let fwd = &s[s.find("fn f").unwrap()..s.find("fn uncall").unwrap()];
    assert_eq!(fwd.matches("shared_arg").count(), 2, "{fwd}");
    assert_eq!(fwd.matches("distinct").count(), 1, "{fwd}");
    assert_eq!(fwd.matches("= & mut (* v) [__rev_").count(), 1, "{fwd}");
    assert_eq!(fwd.matches("= & mut __rev_").count(), 1, "{fwd}");
    // fields of elements that may be one: copied, as before
    let s = ok(quote! {
        fn f<T: RevReal>(v: &mut Vec<(T, T)>, i: &mut usize, j: &mut usize) {
            g(v[i].0, v[j].1);
            g(v[0].0, v[j].0);
        }
    });
    let fwd = &s[s.find("fn f").unwrap()..s.find("fn uncall").unwrap()];
    assert_eq!(fwd.matches("shared_arg").count(), 4, "{fwd}");
}

#[test]
fn a_powi_exponent_that_reads_the_target_is_an_error() {
    // (the inverse took another power: `uncall` from `y = 11` gave −177136; a hunter)
    let e = err(quote! {
        fn f<T: RevReal>(y: &mut T, x: &mut T) { y += x.powi(y.value() as i32); }
    });
    assert!(
        e.contains(
            "`y` is written by this instruction and read by its exponent `y.value() as i32`"
        ),
        "{e}"
    );
    // An element that may be the target (`i == j`), and a field of it.
    let e = err(quote! {
        fn f<T: RevReal>(v: &mut Vec<T>, i: &mut usize, j: &mut usize, x: &mut T) {
            v[i] += x.powi(v[j].value() as i32);
        }
    });
    assert!(e.contains("`v[j]` is written by this instruction"), "{e}");
    let e = err(quote! {
        fn f(s: &mut (f64, i32), x: &mut f64) { s.0 += x.powi(s.0 as i32); }
    });
    assert!(e.contains("read by its exponent"), "{e}");
    // What the instruction does not write may be read.
    ok(quote! {
        fn f(s: &mut (f64, i32), x: &mut f64, n: &mut i32) {
            s.0 += x.powi(s.1);
            s.0 += x.powi(n);
            s.0 += x.powi(x.value() as i32);
        }
    });
}
