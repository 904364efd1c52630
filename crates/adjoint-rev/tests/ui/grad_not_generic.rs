adjoint_rev::reversible! {
    fn f(y: &mut f64, x: &mut f64) {
        y += x.sin();
    }
}

fn main() {
    let _ = adjoint_rev::grad(f {}, (0.0, 1.0), 0);
}
