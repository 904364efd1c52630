//! `reversible!` expanded by a `macro_rules!` macro (a hunter's finding): `$e:expr` fragments
//! arrive as invisible groups, which the parser took for nested expressions (`y += $e` with
//! `x.sin()` was refused). They are read as parenthesised: as written, precedence kept.

use adjoint_core::check::check_gradient;
use adjoint_rev::grad;
use adjoint_rev::prelude::*;

macro_rules! accumulate {
    ($name:ident, $y:ident, $x:ident, $e:expr) => {
        reversible! {
            fn $name<T: RevReal>($y: &mut T, $x: &mut T) {
                $y += $e;
            }
        }
    };
}

accumulate!(add_sin, y, x, x.sin());
accumulate!(add_sq, y, x, x * x);
accumulate!(add_x, y, x, x);

macro_rules! sum_first {
    ($name:ident, $y:ident, $v:ident, $n:expr) => {
        reversible! {
            /// `y += Σ_{i<n} vᵢ²`, the bound a fragment.
            fn $name<T: RevReal>($y: &mut T, $v: &mut Vec<T>) {
                for i in 0..$n {
                    $y += $v[i] * $v[i];
                }
            }
        }
    };
}

sum_first!(all_squares, y, v, v.len());
sum_first!(all_but_last, y, v, v.len() - 1);

#[test]
fn fragments_of_macro_rules_are_read_as_written() -> Result<(), InvertibilityError> {
    type F = fn(&[f64]) -> f64;
    let objectives: [F; 3] = [
        |p| p[0] + p[1].sin(),
        |p| p[0] + p[1] * p[1],
        |p| p[0] + p[1],
    ];
    for x in [0.3, -1.7] {
        let (mut y, mut xs) = (0.5f64, x);
        add_sin(&mut y, &mut xs)?;
        assert_eq!(y, 0.5 + x.sin());
        add_sq(&mut y, &mut xs)?;
        assert_eq!(y, 0.5 + x.sin() + x * x);
        add_x(&mut y, &mut xs)?;
        assert_eq!(y, 0.5 + x.sin() + x * x + x);
        add_x::uncall(&mut y, &mut xs)?;
        add_sq::uncall(&mut y, &mut xs)?;
        add_sin::uncall(&mut y, &mut xs)?;
        assert!((y - 0.5).abs() < 1e-15, "{y}");
        let grads = [
            grad(add_sin {}, (0.5, x), 0)?,
            grad(add_sq {}, (0.5, x), 0)?,
            grad(add_x {}, (0.5, x), 0)?,
        ];
        for (f, g) in objectives.iter().zip(grads) {
            check_gradient(f, &[0.5, x], &[g.0, g.1]).assert_passed();
        }
    }
    let v = vec![1.5, -2.0, 0.5];
    let g = grad(all_squares {}, (0.0, v.clone()), 0)?;
    check_gradient(|p: &[f64]| p.iter().map(|a| a * a).sum(), &v, &g.1).assert_passed();
    let (mut y, mut w) = (0.0, v.clone());
    all_but_last(&mut y, &mut w)?;
    assert_eq!(y, 1.5 * 1.5 + 2.0 * 2.0);
    let g = grad(all_but_last {}, (0.0, v.clone()), 0)?;
    assert_eq!(g.1, [3.0, -4.0, 0.0]);
    Ok(())
}

macro_rules! add_where {
    ($name:ident, $y:ident, $x:ident, $c:expr) => {
        reversible! {
            /// `y += x` where the condition, a fragment, holds.
            fn $name<T: RevReal>($y: &mut T, $x: &mut T) {
                if ($c, ~) {
                    $y += $x;
                }
            }
        }
    };
}

// An integer literal compared with a value inside a fragment: the names the comparison binds
// were spanned at the call site, outside the fragment's hygiene (E0425; a reviewer).
add_where!(add_if_positive, y, x, x > 0);
add_where!(add_if_small, y, x, 1 > x && x > -1);

#[test]
fn integer_literal_comparisons_in_fragments() -> Result<(), InvertibilityError> {
    for (x, pos, small) in [(0.5, 1.5, 1.5), (-0.5, 1.0, 0.5), (2.0, 3.0, 1.0)] {
        let (mut y, mut xs) = (1.0f64, x);
        add_if_positive(&mut y, &mut xs)?;
        assert_eq!(y, pos, "x = {x}");
        let mut y = 1.0f64;
        add_if_small(&mut y, &mut xs)?;
        assert_eq!(y, small, "x = {x}");
    }
    Ok(())
}

macro_rules! apply_then {
    ($name:ident, $y:ident, $x:ident, $f:path, $s:expr) => {
        reversible! {
            /// A call whose callee is a fragment, then a statement passed whole.
            fn $name<T: RevReal>($y: &mut T, $x: &mut T) {
                $f($y, $x);
                $s;
            }
        }
    };
}

reversible! {
    fn add_cube<T: RevReal>(y: &mut T, x: &mut T) {
        y += x.powi(3);
    }
}

apply_then!(cube_and_more, y, x, add_cube, y += x * x);

/// A callee and a whole statement as fragments (`$f:path`, `$s:expr`) were refused: "expected
/// the name of a reversible function", "not a reversible statement" (a reviewer).
#[test]
fn callees_and_statements_as_fragments() -> Result<(), InvertibilityError> {
    let x = 1.5;
    let (mut y, mut xs) = (0.25f64, x);
    cube_and_more(&mut y, &mut xs)?;
    assert_eq!(y, 0.25 + x * x * x + x * x);
    let g = grad(cube_and_more {}, (0.25, x), 0)?;
    check_gradient(
        |p: &[f64]| p[0] + p[1].powi(3) + p[1] * p[1],
        &[0.25, x],
        &[g.0, g.1],
    )
    .assert_passed();
    Ok(())
}
