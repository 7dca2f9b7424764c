//! The READMEs' Rust examples compile and run as written, against this
//! crate, on fixtures named as they name their models (target.gguf: the
//! llama fixture; eagle3.gguf: its EAGLE-3 draft).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn rust_examples(readme: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(readme).unwrap();
    text.split("```rust\n").skip(1).map(|s| s.split("```").next().unwrap().to_string()).collect()
}

/// The newest compiled rlib of this crate, next to the test binary.
fn rlib() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("libspecdec-") && p.extension().map_or(false, |x| x == "rlib"))
        .max_by_key(|p| p.metadata().unwrap().modified().unwrap())
        .expect("libspecdec rlib")
}

/// The compiler that built the rlib: $RUSTC, else the rustc beside the cargo running the tests.
fn rustc() -> PathBuf {
    if let Ok(r) = std::env::var("RUSTC") {
        return PathBuf::from(r);
    }
    if let Ok(cargo) = std::env::var("CARGO") {
        let beside = Path::new(&cargo).with_file_name("rustc");
        if beside.exists() {
            return beside;
        }
    }
    PathBuf::from("rustc")
}

/// The first CPU this process may run on (from /proc/self/status), for taskset.
fn first_cpu() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| l.trim().split(|c| c == ',' || c == '-').next().map(|s| s.to_string()))
        .unwrap_or_else(|| "0".into())
}

#[test]
fn readme_examples_run() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(common::fixture("llama"), work.join("target.gguf")).unwrap();
    std::os::unix::fs::symlink(common::fixture("eagle3"), work.join("eagle3.gguf")).unwrap();
    let build = common::build_dir().canonicalize().unwrap();
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let mut n = 0;
    for readme in [manifest.join("README.md"), manifest.join("../../README.md")] {
        let examples = rust_examples(&readme);
        assert!(!examples.is_empty(), "{} has no Rust example", readme.display());
        for code in examples {
            n += 1;
            let src = work.join(format!("example{}.rs", n));
            std::fs::write(&src, code).unwrap();
            let bin = work.join(format!("example{}", n));
            let rustc = rustc();
            let out = Command::new(rustc)
                .args(["--edition", "2021", "--crate-type", "bin"])
                .arg("--extern")
                .arg(format!("specdec={}", rlib().display()))
                .arg("-L")
                .arg(&deps)
                .arg("-L")
                .arg(format!("native={}", build.join("src").display()))
                .arg("-L")
                .arg(format!("native={}", build.join("bin").display()))
                .arg("-C")
                .arg(format!("link-arg=-Wl,-rpath,{}:{}", build.join("src").display(), build.join("bin").display()))
                .arg("-o")
                .arg(&bin)
                .arg(&src)
                .output()
                .unwrap();
            assert!(out.status.success(), "{} does not compile:\n{}", readme.display(), String::from_utf8_lossy(&out.stderr));
            // One CPU (the example's contexts take every available CPU): on a
            // shared machine, llama.cpp's spinning threads on busy cores make a
            // 0.05 s run take 10 s.
            let mut cmd = if Path::new("/usr/bin/taskset").exists() {
                let mut c = Command::new("/usr/bin/taskset");
                c.args(["-c", &first_cpu()]).arg(&bin);
                c
            } else {
                Command::new(&bin)
            };
            let run = cmd.current_dir(&work).output().unwrap();
            assert!(run.status.success(), "{} fails:\n{}", readme.display(), String::from_utf8_lossy(&run.stderr));
            assert!(!run.stdout.is_empty());
        }
    }
}
