// AssemblyScript test gene, built with asc's default options.
// {"indent": n} stores n under PREFERENCE formatter/indent; {} reads it back
// ({"saved": <entry or null>}); {"abort": true} throws (env.abort).  Every run
// calls trace() and Math.random(), so the module imports env.trace and env.seed.

@external("rotifer", "readMemory")
declare function readMemory(reqPtr: usize, reqLen: usize, outPtr: usize, outCap: usize): i32;
@external("rotifer", "writeMemory")
declare function writeMemory(reqPtr: usize, reqLen: usize, outPtr: usize, outCap: usize): i32;

const OUT_CAP: usize = 4096;
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function base64(text: string): string {
  const bytes = Uint8Array.wrap(String.UTF8.encode(text));
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (<u32>bytes[i] << 16)
      | (i + 1 < bytes.length ? <u32>bytes[i + 1] << 8 : 0)
      | (i + 2 < bytes.length ? <u32>bytes[i + 2] : 0);
    out += B64.charAt((n >> 18) & 63) + B64.charAt((n >> 12) & 63);
    out += i + 1 < bytes.length ? B64.charAt((n >> 6) & 63) : "=";
    out += i + 2 < bytes.length ? B64.charAt(n & 63) : "=";
  }
  return out;
}

function hostCall(write: bool, request: string): string {
  const req = String.UTF8.encode(request);
  const out = heap.alloc(OUT_CAP);
  const n = write
    ? writeMemory(changetype<usize>(req), <usize>req.byteLength, out, OUT_CAP)
    : readMemory(changetype<usize>(req), <usize>req.byteLength, out, OUT_CAP);
  const result = n < 0 ? `{"result":${n}}` : String.UTF8.decodeUnsafe(out, <usize>n);
  heap.free(out);
  return result;
}

export function alloc(len: i32): usize {
  return heap.alloc(<usize>len);
}

export function express(ptr: usize, len: i32): usize {
  const input = String.UTF8.decodeUnsafe(ptr, <usize>len);
  heap.free(ptr);
  trace("express", 2, <f64>len, Math.random() < 2 ? 1 : 0);
  if (input.startsWith('{"abort":')) {
    throw new Error("the gene was told to abort");
  }
  let output: string;
  if (input.startsWith('{"indent":')) {
    const digits = input.substring(10, input.length - 1);
    const request = `{"key":"formatter/indent","value":"${base64(digits)}","category":"PREFERENCE"}`;
    output = `{"wrote":${hostCall(true, request)}}`;
  } else {
    output = `{"saved":${hostCall(false, '{"key":"formatter/indent"}')}}`;
  }
  return changetype<usize>(String.UTF8.encode(output, true));
}
