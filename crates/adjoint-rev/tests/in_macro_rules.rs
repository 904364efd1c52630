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
