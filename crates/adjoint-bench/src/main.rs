//! `adjoint-bench`: run every registered problem with every engine and report.

use adjoint_bench::alloc::CountingAlloc;
use adjoint_bench::harness::{markdown, run_problem, Record};
use adjoint_bench::{machine, registry};
use clap::{Parser, Subcommand};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Benchmark adjoint's engines against the plain program.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Short timing budgets (the whole run takes well under 2 minutes on 2 cores).
    #[arg(long)]
    quick: bool,
    /// Only problems whose name contains this string.
    #[arg(long)]
    filter: Option<String>,
    /// Where to write bench.json and bench.md.
    #[arg(long, default_value = "bench-results", global = true)]
    out: PathBuf,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// ADBench GMM, BA and LSTM with ADBench's timing protocol (inputs from ../shared/adbench when
    /// present, generated otherwise).
    Adbench {
        /// Small grid and short batches (under 5 minutes on 2 cores).
        #[arg(long)]
        quick: bool,
        /// ADBench's data directory (default: ../shared/adbench).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Measure the full grid (GMM 1k d ≤ 128, 10k d ≤ 32, BA 1–20) even with --quick's
        /// short batches.
        #[arg(long)]
        full_grid: bool,
        /// Thread counts to measure adjoint's engines at, e.g. `1,2,16` (default: 1 and all
        /// cores). Peers run once, with their own threading.
        #[arg(long, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Only inputs whose name contains this string (e.g. `d10`, `ba1`), or one of its
        /// comma-separated parts (`1k/gmm_d10_K25,ba2`); a part ending in `$` is a whole
        /// name (`ba1$`, not `ba10`).
        #[arg(long)]
        filter: Option<String>,
        /// Only these engines, comma-separated (adjoint's and peers', e.g. `tape,jax`).
        #[arg(long, value_delimiter = ',')]
        engines: Option<Vec<String>>,
        /// Where the Python peers compute: `cpu`, or `cuda` (PyTorch's tensors and JAX's arrays
        /// on the GPU, results copied back; their rows are named `pytorch-cuda`, `jax-cuda`).
        /// The interpreter is `peers/.venv`'s, or `$ADJOINT_PEERS_PYTHON`.
        #[arg(long, default_value = "cpu")]
        peer_device: String,
    },
}

/// The thread counts to measure: as given, or 1 and all cores.
fn thread_counts(given: Vec<usize>) -> Result<Vec<usize>, String> {
    let mut t = if given.is_empty() {
        let all = std::thread::available_parallelism().map_or(1, |n| n.get());
        vec![1, all]
    } else {
        given
    };
    if t.contains(&0) {
        return Err("--threads: thread counts must be at least 1".into());
    }
    t.sort_unstable();
    t.dedup();
    Ok(t)
}

fn adbench(
    quick: bool,
    full_grid: bool,
    data: Option<PathBuf>,
    threads: Vec<usize>,
    sel: adjoint_bench::adbench::Selection,
    peer_device: &str,
    out: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    sel.check_engines()?;
    if !["cpu", "cuda"].contains(&peer_device) {
        return Err(format!("--peer-device: `cpu` or `cuda`, not {peer_device:?}").into());
    }
    let dir = adjoint_bench::adbench::data_dir(data.as_deref())?;
    prepare_out(out)?;
    match &dir {
        Some(d) => eprintln!("adbench: inputs from {}", d.display()),
        None => eprintln!("adbench: no ADBench data found; using generated inputs"),
    }
    let work = out.join("adbench-inputs");
    let mut rows = Vec::new();
    let mut manifest = Vec::new();
    for (i, &t) in thread_counts(threads)?.iter().enumerate() {
        eprintln!("adbench: adjoint's engines on {t} thread(s)");
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
        let (r, m) = pool
            .install(|| adjoint_bench::adbench::run(dir.as_deref(), quick, full_grid, &sel, &work));
        rows.extend(r);
        if i == 0 {
            manifest = m;
        }
    }
    if manifest.is_empty() {
        // (before the manifests are written: an earlier run's stay as they were)
        let f = sel.filter.as_deref().unwrap_or("");
        return Err(format!("no input matches --filter {f:?}").into());
    }
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let manifest_path = work.join("manifest.json");
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest)?)?;
    // The same list, tab-separated, for the C++ peer.
    let tsv: String = manifest
        .iter()
        .map(|m| {
            format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                m.task,
                m.name,
                m.source,
                m.path.display(),
                m.reference.display(),
                m.reference_engine
            )
        })
        .collect();
    std::fs::write(work.join("manifest.txt"), tsv)?;
    // adjoint's rows are written before the peers run (they can take minutes), so a run cut
    // short while they do keeps them; the full table replaces them at the end.
    if !rows.is_empty() {
        // (none when only peers are selected: the last run's tables stay until a row exists)
        write_adbench_report(out, &mut rows)?;
        eprintln!(
            "adbench: adjoint's rows written to {} (peers next)",
            out.join("adbench.md").display()
        );
    }
    // Rewritten after each peer row, so that a run cut short keeps what was measured.
    adjoint_bench::adbench::run_peers(&manifest_path, quick, &sel, peer_device, |row| {
        rows.push(adjoint_bench::adbench::with_objective_check(&manifest, row));
        if let Err(e) = write_adbench_report(out, &mut rows) {
            eprintln!("adbench: could not write the table: {e}");
        }
    });
    if rows.is_empty() {
        return Err(
            "nothing was measured: the selected peers are not installed (see the lines above; \
             install them with crates/adjoint-bench/peers/install.sh)"
                .into(),
        );
    }
    let md = write_adbench_report(out, &mut rows)?;
    println!("{md}");
    // Plots show each engine at the largest thread count measured (peers: their own threading).
    let most = rows.iter().map(|r| r.threads).max().unwrap_or(0);
    let plotted: Vec<_> = rows
        .iter()
        .filter(|r| r.threads == 0 || r.threads == most)
        .cloned()
        .collect();
    for p in adjoint_bench::adbench::plot::plot(&plotted, out)? {
        eprintln!("wrote {}", p.display());
    }
    eprintln!("wrote {}", out.join("adbench.md").display());
    Ok(())
}

/// Sort `rows` and write them as `adbench.md` and `adbench.json` under `out`; returns the
/// markdown.
fn write_adbench_report(
    out: &std::path::Path,
    rows: &mut [adjoint_bench::adbench::Row],
) -> Result<String, Box<dyn std::error::Error>> {
    rows.sort_by(|a, b| (&a.task, &a.input).cmp(&(&b.task, &b.input)));
    let machine = machine();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let md = format!(
        "# adjoint-bench adbench\n\nCommand: `{command}`  \nMachine: {machine}\n\n\
         Times follow ADBench's protocol: the minimum time of one evaluation over repeated \
         batches (`--quick`: batches of at least 50 ms, at most 3; otherwise 500 ms, at most \
         10). `objective` is the plain sequential Rust objective, the same program for every \
         engine; `ratio` is derivative ÷ objective.\n\n{}\n## Scaling with threads\n\n{}",
        adjoint_bench::adbench::markdown(rows),
        adjoint_bench::adbench::scaling_markdown(rows)
    );
    std::fs::create_dir_all(out)?;
    write_whole(
        &out.join("adbench.json"),
        &serde_json::to_string_pretty(rows)?,
    )?;
    write_whole(&out.join("adbench.md"), &md)?;
    Ok(md)
}

/// Write `path` through a temporary file renamed over it, so that a run killed while writing
/// (a device script's time limit) leaves the previous table, never half of one.
fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[derive(Serialize)]
struct Report<'a> {
    command: String,
    unix_time: u64,
    machine: String,
    quick: bool,
    records: &'a [Record],
    reversible: &'a [adjoint_bench::revbench::RevRow],
    array: &'a [adjoint_bench::arraybench::ChainRow],
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // (Display, not the `Debug` of `main() -> Result`: `Error: "--engines: …"`)
            eprintln!("adjoint-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `--out`, created and written to before anything is measured (an unwritable directory
/// failed only after the whole run, with an OS error that named no path; a hunter).
fn prepare_out(out: &std::path::Path) -> Result<(), String> {
    let probe = out.join(".adjoint-bench-probe");
    std::fs::create_dir_all(out)
        .and_then(|_| std::fs::write(&probe, b""))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| format!("--out {}: {e}", out.display()))
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(Cmd::Adbench {
        quick,
        data,
        full_grid,
        threads,
        filter,
        engines,
        peer_device,
    }) = args.cmd
    {
        if args.filter.is_some() || args.quick {
            return Err(
                "--filter and --quick before `adbench` apply to the main benchmark only; \
                        write them after the subcommand (`adbench --quick`)"
                    .into(),
            );
        }
        let sel = adjoint_bench::adbench::Selection { filter, engines };
        return adbench(
            quick,
            full_grid,
            data,
            threads,
            sel,
            &peer_device,
            &args.out,
        );
    }
    let budget = if args.quick {
        Duration::from_millis(150)
    } else {
        Duration::from_secs(1)
    };
    let mut problems = registry(args.quick);
    problems.retain(|p| {
        args.filter
            .as_ref()
            .is_none_or(|f| p.name.contains(f.as_str()))
    });
    let rev_matches = args.filter.as_deref().is_none_or(|f| {
        ["graph-embedding", "leapfrog", "sparse", "map-chain"]
            .iter()
            .any(|name| name.contains(f))
    });
    if problems.is_empty() && !rev_matches {
        let f = args.filter.as_deref().unwrap_or("");
        return Err(format!("no problem matches --filter {f:?}").into());
    }
    prepare_out(&args.out)?;
    let machine = machine();
    eprintln!("adjoint-bench on {machine}");
    let total = problems.len();
    let mut records = Vec::new();
    for (i, p) in problems.iter_mut().enumerate() {
        eprintln!("[{}/{}] {} {}", i + 1, total, p.name, p.size);
        records.extend(run_problem(p, budget));
    }
    let rev_rows = adjoint_bench::revbench::run(args.quick, args.filter.as_deref());
    let chain_rows = adjoint_bench::arraybench::run(args.quick, args.filter.as_deref());
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let unix_time = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let md = format!(
        "# adjoint-bench results\n\nCommand: `{command}`  \nMachine: {machine}  \nUnix time: {unix_time}\n{}{}",
        markdown(&records),
        adjoint_bench::revbench::markdown(&rev_rows)
    ) + &adjoint_bench::arraybench::markdown(&chain_rows);
    println!("{md}");
    std::fs::create_dir_all(&args.out)?;
    let report = Report {
        command,
        unix_time,
        machine,
        quick: args.quick,
        records: &records,
        reversible: &rev_rows,
        array: &chain_rows,
    };
    std::fs::write(
        args.out.join("bench.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(args.out.join("bench.md"), md)?;
    eprintln!(
        "wrote {} and {}",
        args.out.join("bench.json").display(),
        args.out.join("bench.md").display()
    );
    Ok(())
}
