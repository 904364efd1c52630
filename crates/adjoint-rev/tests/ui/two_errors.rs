adjoint_rev::reversible! {
    fn f(y: &mut f64, x: &mut f64, z: &mut f64) {
        y += y * x;
        if (x > 0.0, ~) {
            z = x;
        }
        z += x;
    }

    fn g(y: &mut f64) {
        let t = 0.0;
        t += y.exp();
    }
}

fn main() {}
