//! ADBench input files: readers, writers and generators in the same formats.

use crate::problems::uniform;
use std::fmt::Write as _;
use std::path::Path;

/// A GMM instance (`d K n`, alphas, means, icf, points, Wishart prior).
#[derive(Clone, Debug, PartialEq)]
pub struct GmmInput {
    /// Dimension.
    pub d: usize,
    /// Components.
    pub k: usize,
    /// Points.
    pub n: usize,
    /// `K` mixture log-weights.
    pub alphas: Vec<f64>,
    /// `K × d` means, row-major.
    pub means: Vec<f64>,
    /// `K × d(d+1)/2` inverse-covariance factors: d log-diagonal entries, then the strictly
    /// lower triangle column by column.
    pub icf: Vec<f64>,
    /// `n × d` points, row-major.
    pub x: Vec<f64>,
    /// Wishart γ.
    pub gamma: f64,
    /// Wishart m.
    pub m: f64,
}

impl GmmInput {
    /// Parameters per component's icf block.
    pub fn icf_size(&self) -> usize {
        self.d * (self.d + 1) / 2
    }

    /// The differentiated parameters in ADBench's order: alphas, means, icf.
    pub fn params(&self) -> Vec<f64> {
        [&self.alphas[..], &self.means, &self.icf].concat()
    }
}

/// Errors reading an input file.
#[derive(Debug)]
pub struct ReadError(pub String);

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ReadError {}

/// The values of an input file in order, each with its line, read field by field: every error
/// names the file, the line and the field, and [`Tokens::finish`] refuses values left over (a
/// header whose counts do not match the data, or a stray value, shifted every field after it
/// and was measured as ADBench's input; a hunter).
struct Tokens<'a> {
    toks: Vec<(usize, &'a str)>,
    next: usize,
    what: &'a str,
}

/// Most values a header may ask a reader to hold or replicate (`2³⁰` values, 8 GiB of `f64`;
/// ADBench's largest input, ba20, replicates 2.9e7): a corrupt count fails here with a
/// message, not in the allocator.
const MAX_VALUES: usize = 1 << 30;

impl<'a> Tokens<'a> {
    fn new(text: &'a str, what: &'a str) -> Self {
        let toks = text
            .lines()
            .enumerate()
            .flat_map(|(i, l)| l.split_whitespace().map(move |t| (i + 1, t)))
            .collect();
        Tokens {
            toks,
            next: 0,
            what,
        }
    }
    fn err(&self, line: usize, field: &str, msg: impl std::fmt::Display) -> ReadError {
        ReadError(format!("{}: line {line}, {field}: {msg}", self.what))
    }
    /// A finite number.
    fn f64(&mut self, field: &str) -> Result<f64, ReadError> {
        let Some(&(line, t)) = self.toks.get(self.next) else {
            let line = self.toks.last().map_or(1, |&(l, _)| l);
            return Err(self.err(line, field, "the file ends here"));
        };
        self.next += 1;
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            Ok(v) => Err(self.err(line, field, format!("{v} is not a finite number"))),
            Err(_) => Err(self.err(line, field, format!("{t:?} is not a number"))),
        }
    }
    /// A count of at least `min`.
    fn count(&mut self, field: &str, min: usize) -> Result<usize, ReadError> {
        let v = self.f64(field)?;
        let line = self.toks[self.next - 1].0;
        if v < min as f64 || v.fract() != 0.0 || v > MAX_VALUES as f64 {
            return Err(self.err(
                line,
                field,
                format!("{v} is not a count from {min} to {MAX_VALUES}"),
            ));
        }
        Ok(v as usize)
    }
    /// `n` numbers, which the file must still hold.
    fn vec(&mut self, n: usize, field: &str) -> Result<Vec<f64>, ReadError> {
        let left = self.toks.len() - self.next;
        if n > left {
            let line = self
                .toks
                .get(self.next)
                .map_or_else(|| self.toks.last().map_or(1, |&(l, _)| l), |&(l, _)| l);
            return Err(self.err(
                line,
                field,
                format!("the header asks for {n} values here, the file holds {left} more"),
            ));
        }
        (0..n).map(|_| self.f64(field)).collect()
    }
    /// No value may be left: `header` says what the counts asked for.
    fn finish(&self, header: &str) -> Result<(), ReadError> {
        match self.toks.get(self.next) {
            None => Ok(()),
            Some(&(line, t)) => Err(self.err(
                line,
                "after the last field",
                format!(
                    "{t:?} and {} more values beyond what the header ({header}) asks for",
                    self.toks.len() - self.next - 1
                ),
            )),
        }
    }
}

/// `a · b`, or an error naming the header when it overflows or passes [`MAX_VALUES`].
fn size(a: usize, b: usize, what: &str, header: &str) -> Result<usize, ReadError> {
    a.checked_mul(b)
        .filter(|&v| v <= MAX_VALUES)
        .ok_or_else(|| {
            ReadError(format!(
                "{what}: the header ({header}) asks for more than {MAX_VALUES} values"
            ))
        })
}

/// Parse a GMM file's text: `d K n` (each at least 1), then K alphas, K × d means, K icf rows,
/// n points and `γ m` (γ > 0, m ≥ 0), nothing after.
pub fn parse_gmm(text: &str, what: &str) -> Result<GmmInput, ReadError> {
    let mut t = Tokens::new(text, what);
    let (d, k, n) = (t.count("d", 1)?, t.count("K", 1)?, t.count("n", 1)?);
    let header = format!("d = {d}, K = {k}, n = {n}");
    let icf_sz = size(d, d + 1, what, &header)? / 2;
    let alphas = t.vec(k, "alphas")?;
    let means = t.vec(size(k, d, what, &header)?, "means")?;
    let icf = t.vec(size(k, icf_sz, what, &header)?, "icf")?;
    let x = t.vec(size(n, d, what, &header)?, "points")?;
    let gamma = t.f64("Wishart γ")?;
    let m = t.f64("Wishart m")?;
    if gamma <= 0.0 || m < 0.0 {
        let line = t.toks[t.next - 1].0;
        return Err(t.err(
            line,
            "Wishart γ, m",
            format!("γ = {gamma}, m = {m}: need γ > 0, m ≥ 0"),
        ));
    }
    t.finish(&header)?;
    Ok(GmmInput {
        d,
        k,
        n,
        alphas,
        means,
        icf,
        x,
        gamma,
        m,
    })
}

/// Read a GMM file.
pub fn read_gmm(path: &Path) -> Result<GmmInput, ReadError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ReadError(format!("{}: {e}", path.display())))?;
    parse_gmm(&text, &path.display().to_string())
}

/// Write a GMM instance in ADBench's format.
pub fn write_gmm(g: &GmmInput) -> String {
    let mut s = format!("{} {} {}\n", g.d, g.k, g.n);
    let rows = |s: &mut String, v: &[f64], width: usize| {
        for row in v.chunks(width.max(1)) {
            for x in row {
                let _ = write!(s, "{x:.6} ");
            }
            s.push('\n');
        }
    };
    rows(&mut s, &g.alphas, 1);
    rows(&mut s, &g.means, g.d);
    rows(&mut s, &g.icf, g.icf_size());
    rows(&mut s, &g.x, g.d);
    let _ = writeln!(s, "{:.6} {}", g.gamma, g.m);
    s
}

/// Standard normal samples (Box–Muller over the crate's SplitMix stream).
pub fn normal(seed: u64, n: usize) -> Vec<f64> {
    uniform(seed, 2 * n)
        .chunks_exact(2)
        .map(|u| {
            let (u1, u2) = (0.5 * (u[0] + 1.0) + 1e-12, 0.5 * (u[1] + 1.0));
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect()
}

/// Generate a GMM instance with ADBench's recipe: alphas, icf and points ~ N(0, 1), means
/// ~ U(0, 1), γ = 1, m = 0.
pub fn generate_gmm(d: usize, k: usize, n: usize, seed: u64) -> GmmInput {
    let icf_sz = d * (d + 1) / 2;
    GmmInput {
        d,
        k,
        n,
        alphas: normal(seed, k),
        means: uniform(seed + 1, k * d)
            .into_iter()
            .map(|u| 0.5 * (u + 1.0))
            .collect(),
        icf: normal(seed + 2, k * icf_sz),
        x: normal(seed + 3, n * d),
        gamma: 1.0,
        m: 0.0,
    }
}

/// Replicate a GMM instance's points to `n` (ADBench's 2.5M set is the 10k set repeated).
pub fn replicate_points(g: &GmmInput, n: usize) -> GmmInput {
    let mut out = g.clone();
    out.x = (0..n)
        .flat_map(|i| g.x[(i % g.n) * g.d..(i % g.n + 1) * g.d].iter().copied())
        .collect();
    out.n = n;
    out
}

/// A BA instance after replication.
#[derive(Clone, Debug, PartialEq)]
pub struct BaInput {
    /// Cameras.
    pub n: usize,
    /// Points.
    pub m: usize,
    /// Observations.
    pub p: usize,
    /// `n × 11` camera parameters: r (3), C (3), f, u0 v0, k1 k2.
    pub cams: Vec<f64>,
    /// `m × 3` points.
    pub x: Vec<f64>,
    /// `p` weights.
    pub w: Vec<f64>,
    /// `p × 2` observations: (camera, point) indices.
    pub obs: Vec<[usize; 2]>,
    /// `p × 2` features.
    pub feats: Vec<f64>,
}

impl BaInput {
    /// Columns of the Jacobian: 11n + 3m + p.
    pub fn n_cols(&self) -> usize {
        11 * self.n + 3 * self.m + self.p
    }
}

/// Parse a BA file's text and replicate its one camera/point/weight/feature as the reference
/// reader does: observation i uses camera i mod n and point i mod m.
/// `n m p` (each at least 1), then one camera (11 values), one point (3), one weight and one
/// feature (2), nothing after.
pub fn parse_ba(text: &str, what: &str) -> Result<BaInput, ReadError> {
    let mut t = Tokens::new(text, what);
    let (n, m, p) = (t.count("n", 1)?, t.count("m", 1)?, t.count("p", 1)?);
    let header = format!("n = {n}, m = {m}, p = {p}");
    // what replication will hold, in values: 11n + 3m + 5p (weights, two indices, a feature)
    size(11, n, what, &header)?
        .checked_add(size(3, m, what, &header)?)
        .and_then(|v| v.checked_add(size(5, p, what, &header).ok()?))
        .filter(|&v| v <= MAX_VALUES)
        .ok_or_else(|| {
            ReadError(format!(
                "{what}: the header ({header}) asks for more than {MAX_VALUES} values"
            ))
        })?;
    let cam = t.vec(11, "camera")?;
    let pt = t.vec(3, "point")?;
    let w = t.f64("weight")?;
    let feat = t.vec(2, "feature")?;
    t.finish(&header)?;
    Ok(BaInput {
        n,
        m,
        p,
        cams: cam.iter().copied().cycle().take(11 * n).collect(),
        x: pt.iter().copied().cycle().take(3 * m).collect(),
        w: vec![w; p],
        obs: (0..p).map(|i| [i % n, i % m]).collect(),
        feats: feat.iter().copied().cycle().take(2 * p).collect(),
    })
}

/// Read a BA file.
pub fn read_ba(path: &Path) -> Result<BaInput, ReadError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ReadError(format!("{}: {e}", path.display())))?;
    parse_ba(&text, &path.display().to_string())
}

/// A BA file's text with the given sizes and the camera/point/weight/feature of ADBench's files.
pub fn write_ba(n: usize, m: usize, p: usize) -> String {
    format!(
        "{n} {m} {p}\n-0.758453 -1.109613 -0.845551 34.556073 39.676747 53.881673 419.194514 \
         5.864426 -8.518870 0.087812 0.002739\n7.203245 0.001144 3.023326\n0.417022\n\
         271.760969 834.209256\n"
    )
}

/// An LSTM instance (`l c b`): ADBench's diagonal LSTM of `l` layers over `c` characters of `b`
/// bits each.
#[derive(Clone, Debug, PartialEq)]
pub struct LstmInput {
    /// Layers.
    pub l: usize,
    /// Sequence length (characters).
    pub c: usize,
    /// Bits per character (hidden size).
    pub b: usize,
    /// `2l × 4b` main parameters: per layer a row of weights (forget, input, output, change
    /// gates, `b` each), then a row of biases.
    pub main: Vec<f64>,
    /// `3 × b` extra parameters: input weights, output weights, output biases.
    pub extra: Vec<f64>,
    /// `2l × b` initial state: per layer the hidden row, then the cell row (not differentiated).
    pub state: Vec<f64>,
    /// `c × b` sequence (bits).
    pub seq: Vec<f64>,
}

impl LstmInput {
    /// The differentiated parameters in ADBench's order: main, then extra (`8lb + 3b`).
    pub fn params(&self) -> Vec<f64> {
        [&self.main[..], &self.extra].concat()
    }
}

/// Parse an LSTM file's text.
pub fn parse_lstm(text: &str, what: &str) -> Result<LstmInput, ReadError> {
    let mut t = Tokens::new(text, what);
    let (l, c, b) = (t.count("l", 1)?, t.count("c", 2)?, t.count("b", 1)?);
    let header = format!("l = {l}, c = {c}, b = {b}");
    let lb = size(l, b, what, &header)?;
    let main = t.vec(size(8, lb, what, &header)?, "main parameters")?;
    let extra = t.vec(size(3, b, what, &header)?, "extra parameters")?;
    let state = t.vec(size(2, lb, what, &header)?, "state")?;
    let seq = t.vec(size(c, b, what, &header)?, "sequence")?;
    t.finish(&header)?;
    Ok(LstmInput {
        l,
        c,
        b,
        main,
        extra,
        state,
        seq,
    })
}

/// Read an LSTM file.
pub fn read_lstm(path: &Path) -> Result<LstmInput, ReadError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ReadError(format!("{}: {e}", path.display())))?;
    parse_lstm(&text, &path.display().to_string())
}

/// Write an LSTM instance in ADBench's format (blank lines between blocks).
pub fn write_lstm(g: &LstmInput) -> String {
    let mut s = format!("{} {} {}\n", g.l, g.c, g.b);
    let block = |s: &mut String, v: &[f64], width: usize| {
        s.push('\n');
        for row in v.chunks(width) {
            let line: Vec<String> = row.iter().map(|x| format!("{x}")).collect();
            s.push_str(&line.join(" "));
            s.push('\n');
        }
    };
    block(&mut s, &g.main, 4 * g.b);
    block(&mut s, &g.extra, g.b);
    block(&mut s, &g.state, g.b);
    block(&mut s, &g.seq, g.b);
    s
}

/// Generate an LSTM instance with ADBench's recipe: parameters and state ~ U(0, 1), the
/// sequence random bits.
pub fn generate_lstm(l: usize, c: usize, b: usize, seed: u64) -> LstmInput {
    let u01 = |seed: u64, n: usize| -> Vec<f64> {
        uniform(seed, n)
            .into_iter()
            .map(|u| 0.5 * (u + 1.0))
            .collect()
    };
    LstmInput {
        l,
        c,
        b,
        main: u01(seed, 8 * l * b),
        extra: u01(seed + 1, 3 * b),
        state: u01(seed + 2, 2 * l * b),
        seq: uniform(seed + 3, c * b)
            .into_iter()
            .map(|u| if u > 0.0 { 1.0 } else { 0.0 })
            .collect(),
    }
}
