//! Rust test gene for wasm32-wasi (a cdylib, no crates): an express gene
//! that also imports WASI (println! goes to the gene's log).
//! {"indent": n} stores n under PREFERENCE formatter/indent; {} reads it back
//! ({"saved": <entry or null>}); {"panic": true} panics.
use std::ffi::CString;

#[link(wasm_import_module = "rotifer")]
extern "C" {
    #[link_name = "readMemory"]
    fn read_memory(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
    #[link_name = "writeMemory"]
    fn write_memory(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
}

const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] as char } else { '=' });
    }
    out
}

fn host_call(write: bool, request: &str) -> String {
    let mut out = vec![0u8; 4096];
    let n = unsafe {
        if write {
            write_memory(request.as_ptr(), request.len(), out.as_mut_ptr(), out.len())
        } else {
            read_memory(request.as_ptr(), request.len(), out.as_mut_ptr(), out.len())
        }
    };
    if n < 0 {
        return format!("{{\"result\":{}}}", n);
    }
    String::from_utf8_lossy(&out[..n as usize]).into_owned()
}

#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    let mut buf = Vec::<u8>::with_capacity(len);
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

#[no_mangle]
pub extern "C" fn express(ptr: *mut u8, len: usize) -> *mut i8 {
    let input = unsafe { String::from_utf8_lossy(std::slice::from_raw_parts(ptr, len)).into_owned() };
    println!("rust gene got {} bytes", len);
    if input.starts_with("{\"panic\":") {
        panic!("the gene was told to panic");
    }
    let output = if let Some(rest) = input.strip_prefix("{\"indent\":") {
        let digits = rest.trim_end_matches('}');
        let request = format!(
            "{{\"key\":\"formatter/indent\",\"value\":\"{}\",\"category\":\"PREFERENCE\"}}",
            base64(digits.as_bytes()));
        format!("{{\"wrote\":{}}}", host_call(true, &request))
    } else {
        format!("{{\"saved\":{}}}", host_call(false, "{\"key\":\"formatter/indent\"}"))
    };
    CString::new(output).unwrap().into_raw()
}
