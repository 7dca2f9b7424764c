//! Links libspecdec and the libllama it was built with.
//!
//! Where: $SPECDEC_LIB_DIR (libspecdec.so and libllama.so both there, as
//! `cmake --install` lays them out), else the build directory
//! $SPECDEC_BUILD_DIR or the checkout's build/ (src/libspecdec.so,
//! bin/libllama.so). Those directories are also written into the binaries'
//! run path, so tests and examples run without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SPECDEC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=SPECDEC_BUILD_DIR");
    let dirs: Vec<PathBuf> = if let Ok(dir) = env::var("SPECDEC_LIB_DIR") {
        vec![PathBuf::from(dir)]
    } else {
        let build = env::var("SPECDEC_BUILD_DIR").map(PathBuf::from).unwrap_or_else(|_| {
            PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../build")
        });
        vec![build.join("src"), build.join("bin")]
    };
    for dir in &dirs {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=specdec");
    println!("cargo:rustc-link-lib=dylib=llama");
}
