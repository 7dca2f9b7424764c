//! GGUF metadata and pair rules, without loading weights.

use std::ffi::{CStr, CString};
use std::fmt;
use std::path::Path;

use crate::error::{check, Error, Result};
use crate::sys;

/// `specdec_strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Strategy {
    /// The target's own NextN heads.
    Mtp = sys::SPECDEC_STRATEGY_MTP,
    /// An EAGLE-3 draft fed with three target layers.
    Eagle3 = sys::SPECDEC_STRATEGY_EAGLE3,
    /// A DFlash / DFlash2 block-diffusion draft.
    DFlash = sys::SPECDEC_STRATEGY_DFLASH,
    /// A DFlash draft with a Markov head.
    DSpark = sys::SPECDEC_STRATEGY_DSPARK,
    /// A classic small draft model sharing the vocabulary.
    Draft = sys::SPECDEC_STRATEGY_DRAFT,
    /// n-gram lookup in the history.
    NgramSimple = sys::SPECDEC_STRATEGY_NGRAM_SIMPLE,
    /// n-gram map, keys.
    NgramMapK = sys::SPECDEC_STRATEGY_NGRAM_MAP_K,
    /// n-gram map, keys and 4 values.
    NgramMapK4v = sys::SPECDEC_STRATEGY_NGRAM_MAP_K4V,
    /// n-gram mod.
    NgramMod = sys::SPECDEC_STRATEGY_NGRAM_MOD,
    /// n-gram cache.
    NgramCache = sys::SPECDEC_STRATEGY_NGRAM_CACHE,
}

impl Strategy {
    /// Every strategy, in value order.
    pub const ALL: [Strategy; 10] = [
        Strategy::Mtp,
        Strategy::Eagle3,
        Strategy::DFlash,
        Strategy::DSpark,
        Strategy::Draft,
        Strategy::NgramSimple,
        Strategy::NgramMapK,
        Strategy::NgramMapK4v,
        Strategy::NgramMod,
        Strategy::NgramCache,
    ];

    /// From its C value.
    pub fn from_raw(v: sys::specdec_strategy) -> Option<Strategy> {
        Strategy::ALL.iter().copied().find(|s| *s as i32 == v)
    }

    /// Parses a name printed by [`Strategy::name`] ("mtp", "ngram-map-k").
    pub fn from_name(name: &str) -> Result<Strategy> {
        let c = CString::new(name).map_err(|_| Error::InvalidArgument { message: "NUL in name".into() })?;
        let mut out = 0;
        // SAFETY: a NUL-terminated string and an out pointer.
        check(unsafe { sys::specdec_strategy_from_name(c.as_ptr(), &mut out) })?;
        Strategy::from_raw(out).ok_or_else(|| Error::InvalidArgument { message: format!("strategy {}", out) })
    }

    /// Its short name (`specdec_strategy_name`).
    pub fn name(self) -> &'static str {
        // SAFETY: static storage for every valid value.
        unsafe { CStr::from_ptr(sys::specdec_strategy_name(self as i32)) }.to_str().unwrap_or("")
    }

    /// Whether it drafts from a draft context (all but the n-gram family).
    pub fn needs_draft_context(self) -> bool {
        // SAFETY: pure.
        unsafe { sys::specdec_strategy_needs_draft_context(self as i32) }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `specdec_model_info`: a GGUF file's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: String,
    pub file_size: u64,
    pub n_params: u64,
    pub n_tensors: u32,
    pub n_vocab: u32,
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_layer_nextn: u32,
    pub target_layers: Vec<i32>,
    pub target_hidden_size: u32,
    pub block_size: u32,
    pub dflash2: bool,
    pub markov_head: bool,
    /// Strategies the file can take part in (as target or as draft).
    pub strategies: Vec<Strategy>,
}

fn info_from(i: &sys::specdec_model_info) -> ModelInfo {
    let text = |b: &[std::os::raw::c_char]| {
        let bytes: Vec<u8> = b.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    ModelInfo {
        architecture: text(&i.architecture),
        name: text(&i.name),
        file_size: i.file_size,
        n_params: i.n_params,
        n_tensors: i.n_tensors,
        n_vocab: i.n_vocab,
        n_embd: i.n_embd,
        n_layer: i.n_layer,
        n_layer_nextn: i.n_layer_nextn,
        target_layers: i.target_layers[..(i.n_target_layers as usize).min(sys::SPECDEC_MAX_TARGET_LAYERS)].to_vec(),
        target_hidden_size: i.target_hidden_size,
        block_size: i.block_size,
        dflash2: i.dflash2,
        markov_head: i.markov_head,
        strategies: Strategy::ALL.iter().copied().filter(|s| i.strategies & (1u32 << (*s as u32)) != 0).collect(),
    }
}

/// A path as the NUL-terminated string the C calls take (these and
/// [`LlamaModel::load_from_file`](crate::LlamaModel::load_from_file));
/// `InvalidArgument` when it holds a NUL byte.
pub(crate) fn path_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::InvalidArgument { message: "path holds a NUL byte".into() })
}

fn opt_path_cstring(path: Option<&Path>) -> Result<Option<CString>> {
    path.map(path_cstring).transpose()
}

/// A GGUF file's metadata (`specdec_inspect`).
pub fn inspect(path: impl AsRef<Path>) -> Result<ModelInfo> {
    let c = path_cstring(path.as_ref())?;
    // SAFETY: zeroed plain data is a valid out value.
    let mut info: sys::specdec_model_info = unsafe { std::mem::zeroed() };
    // SAFETY: a path and an out pointer.
    check(unsafe { sys::specdec_inspect(c.as_ptr(), &mut info) })?;
    Ok(info_from(&info))
}

/// The same from a file's bytes (`specdec_inspect_buffer`).
pub fn inspect_buffer(data: &[u8]) -> Result<ModelInfo> {
    // SAFETY: as above.
    let mut info: sys::specdec_model_info = unsafe { std::mem::zeroed() };
    // SAFETY: data.len() readable bytes.
    check(unsafe { sys::specdec_inspect_buffer(data.as_ptr().cast(), data.len(), &mut info) })?;
    Ok(info_from(&info))
}

/// Whether the files can run `strategy` together, from metadata alone
/// (`specdec_check_pair`): `Ok(())`, or the compatibility error saying why not.
pub fn check_pair(target: impl AsRef<Path>, draft: Option<&Path>, strategy: Strategy) -> Result<()> {
    let t = path_cstring(target.as_ref())?;
    let d = opt_path_cstring(draft)?;
    // SAFETY: NUL-terminated paths (or NULL) that outlive the call.
    check(unsafe { sys::specdec_check_pair(t.as_ptr(), d.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()), strategy as i32) })
}

/// Whether exact kernels make this build compute the model at `path`
/// batch-invariantly, from its tensor types alone (`specdec_check_exact`):
/// `Ok(())`, or `Error::Unavailable` naming the weight type or build option
/// not covered. Says nothing of whether exact kernels are on now.
pub fn check_exact(path: impl AsRef<Path>) -> Result<()> {
    let p = path_cstring(path.as_ref())?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe { sys::specdec_check_exact(p.as_ptr()) })
}

/// The strategy for a target and an optional draft (`specdec_detect_strategy`).
pub fn detect_strategy(target: impl AsRef<Path>, draft: Option<&Path>) -> Result<Strategy> {
    let t = path_cstring(target.as_ref())?;
    let d = opt_path_cstring(draft)?;
    let mut out = 0;
    // SAFETY: as above.
    check(unsafe { sys::specdec_detect_strategy(t.as_ptr(), d.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()), &mut out) })?;
    Strategy::from_raw(out).ok_or_else(|| Error::InvalidArgument { message: format!("strategy {}", out) })
}
