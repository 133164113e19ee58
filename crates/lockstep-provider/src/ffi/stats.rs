//! `stats_get` / `stats_free`: a C array of `wsrep_stats_var` whose strings
//! we own until the server hands the array back.

use crate::stats::StatValue;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;
use wsrep_abi::StatsVar;

/// One array handed to the server, with the strings it points into.
struct Block {
    vars: Vec<StatsVar>,
    _strings: Vec<CString>,
}

// SAFETY: the raw pointers in `vars` point into `_strings`, owned by the
// same block; nothing else aliases them, so moving the block is sound.
unsafe impl Send for Block {}

static OUTSTANDING: Mutex<Option<HashMap<usize, Block>>> = Mutex::new(None);

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

pub fn export(values: Vec<(&'static str, StatValue)>) -> *mut StatsVar {
    let mut strings = Vec::with_capacity(values.len() * 2);
    let mut vars = Vec::with_capacity(values.len() + 1);
    for (name, value) in values {
        let cname = cstring(name);
        let var = match value {
            StatValue::Int(v) => StatsVar::int64(cname.as_ptr(), v),
            StatValue::Double(v) => StatsVar::double(cname.as_ptr(), v),
            StatValue::Str(s) => {
                let cs = cstring(&s);
                let var = StatsVar::string(cname.as_ptr(), cs.as_ptr());
                strings.push(cs);
                var
            }
        };
        // The CString's heap buffer does not move when the CString does.
        strings.push(cname);
        vars.push(var);
    }
    vars.push(StatsVar::END);
    let mut block = Block {
        vars,
        _strings: strings,
    };
    let ptr = block.vars.as_mut_ptr();
    OUTSTANDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(ptr as usize, block);
    ptr
}

pub fn release(ptr: *mut StatsVar) {
    if let Some(map) = OUTSTANDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
    {
        map.remove(&(ptr as usize));
    }
}
