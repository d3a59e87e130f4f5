;; probe: an adversarial gene for the reliability suite.  It performs exactly
;; the one memory call its input asks for, with the request bytes the test
;; chose, and reports what the host said:
;;
;;   input   ["read"|"write"|"query"|"delete", REQUEST]   (REQUEST is the JSON
;;           request of the WASM ABI, passed to the host byte for byte)
;;   output  {"result": R, "body": B}   R the host function's result; B the
;;           response (R >= 0), the error body the host left in out, or null
;;
;; The op is told apart by the input's third byte (r, w, q, d); the request is
;; everything after the first comma up to the closing bracket.
(module
  (import "rotifer" "readMemory" (func $readMemory (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "writeMemory" (func $writeMemory (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "queryMemory" (func $queryMemory (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "deleteMemory" (func $deleteMemory (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; ---- rotifer WAT library v1 (copied verbatim into every test gene) ----
  ;; Memory map: 1000..1011 scratch for $int, 1024.. constants (256-byte slots,
  ;; NUL-terminated), 16384.. heap (a bump allocator that grows memory).
  ;; Output and requests are assembled with a "builder": $begin reserves a
  ;; buffer, $byte/$bytes/$str/$int append, $len measures, $end NUL-terminates
  ;; and returns the start (the pointer express returns).
  (global $heap (mut i32) (i32.const 16384))
  (global $b (mut i32) (i32.const 0))
  (global $bp (mut i32) (i32.const 0))

  (func $alloc (export "alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 15))
                             (i32.const -16)))
    (local.set $have (i32.shl (memory.size) (i32.const 16)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq (memory.grow (i32.shr_u (i32.add (i32.sub (local.get $end) (local.get $have))
                                                     (i32.const 65535))
                                            (i32.const 16)))
                    (i32.const -1))
          (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $p))

  (func $strlen (param $p i32) (result i32)
    (local $q i32)
    (local.set $q (local.get $p))
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (local.get $q))))
        (local.set $q (i32.add (local.get $q) (i32.const 1)))
        (br $next)))
    (i32.sub (local.get $q) (local.get $p)))

  (func $begin (param $cap i32)
    (global.set $b (call $alloc (local.get $cap)))
    (global.set $bp (global.get $b)))

  (func $byte (param $c i32)
    (i32.store8 (global.get $bp) (local.get $c))
    (global.set $bp (i32.add (global.get $bp) (i32.const 1))))

  (func $bytes (param $p i32) (param $n i32)
    (memory.copy (global.get $bp) (local.get $p) (local.get $n))
    (global.set $bp (i32.add (global.get $bp) (local.get $n))))

  (func $str (param $p i32)
    (call $bytes (local.get $p) (call $strlen (local.get $p))))

  (func $int (param $v i32)
    (local $q i32) (local $u i32)
    (if (i32.lt_s (local.get $v) (i32.const 0))
      (then (call $byte (i32.const 45))
            (local.set $u (i32.sub (i32.const 0) (local.get $v))))
      (else (local.set $u (local.get $v))))
    (local.set $q (i32.const 1012))
    (loop $digit
      (local.set $q (i32.sub (local.get $q) (i32.const 1)))
      (i32.store8 (local.get $q) (i32.add (i32.const 48) (i32.rem_u (local.get $u) (i32.const 10))))
      (local.set $u (i32.div_u (local.get $u) (i32.const 10)))
      (br_if $digit (local.get $u)))
    (call $bytes (local.get $q) (i32.sub (i32.const 1012) (local.get $q))))

  (func $len (result i32)
    (i32.sub (global.get $bp) (global.get $b)))

  (func $end (result i32)
    (call $byte (i32.const 0))
    (global.get $b))

  ;; offset of the NUL-terminated $needle in [$p, $p + $n), or -1
  (func $find (param $p i32) (param $n i32) (param $needle i32) (result i32)
    (local $m i32) (local $i i32) (local $j i32)
    (local.set $m (call $strlen (local.get $needle)))
    (block $none
      (loop $at
        (br_if $none (i32.gt_s (i32.add (local.get $i) (local.get $m)) (local.get $n)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $cmp
            (if (i32.eq (local.get $j) (local.get $m)) (then (return (local.get $i))))
            (br_if $miss (i32.ne
              (i32.load8_u (i32.add (local.get $p) (i32.add (local.get $i) (local.get $j))))
              (i32.load8_u (i32.add (local.get $needle) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $cmp)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $at)))
    (i32.const -1))

  ;; the integer at $p, after any ':', ' ' or '"', reading no further than $end
  (func $int_at (param $p i32) (param $end i32) (result i32)
    (local $c i32) (local $v i32) (local $neg i32)
    (block $go
      (loop $skip
        (br_if $go (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (br_if $go (i32.and (i32.ne (local.get $c) (i32.const 58))
                            (i32.and (i32.ne (local.get $c) (i32.const 32))
                                     (i32.ne (local.get $c) (i32.const 34)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $skip)))
    (if (i32.and (i32.lt_u (local.get $p) (local.get $end))
                 (i32.eq (i32.load8_u (local.get $p)) (i32.const 45)))
      (then (local.set $neg (i32.const 1))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    (block $stop
      (loop $digit
        (br_if $stop (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
        (br_if $stop (i32.gt_u (local.get $c) (i32.const 9)))
        (local.set $v (i32.add (i32.mul (local.get $v) (i32.const 10)) (local.get $c)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $digit)))
    (if (result i32) (local.get $neg)
      (then (i32.sub (i32.const 0) (local.get $v)))
      (else (local.get $v))))

  ;; append {"result":R,"body":B}: B is the response (R >= 0 bytes at $out),
  ;; the NUL-terminated error body the host left at $out, or null
  (data (i32.const 1024) "{\"result\":\00")
  (data (i32.const 1040) ",\"body\":\00")
  (data (i32.const 1056) "null\00")
  (func $result_json (param $r i32) (param $out i32)
    (call $str (i32.const 1024))
    (call $int (local.get $r))
    (call $str (i32.const 1040))
    (if (i32.ge_s (local.get $r) (i32.const 0))
      (then (call $bytes (local.get $out) (local.get $r)))
      (else
        (if (i32.load8_u (local.get $out))
          (then (call $str (local.get $out)))
          (else (call $str (i32.const 1056))))))
    (call $byte (i32.const 125)))

  ;; a zeroed buffer for a host call's out
  (func $out_buffer (param $cap i32) (result i32)
    (local $p i32)
    (local.set $p (call $alloc (local.get $cap)))
    (memory.fill (local.get $p) (i32.const 0) (local.get $cap))
    (local.get $p))
  ;; ---- end of rotifer WAT library ----

  (global $cap i32 (i32.const 262144))

  (func (export "express") (param $in i32) (param $n i32) (result i32)
    (local $op i32) (local $req i32) (local $len i32) (local $out i32) (local $r i32)
    (local.set $op (i32.load8_u (i32.add (local.get $in) (i32.const 2))))
    ;; the request starts after the first comma
    (local.set $req (local.get $in))
    (block $found
      (loop $scan
        (br_if $found (i32.eq (i32.load8_u (local.get $req)) (i32.const 44)))
        (local.set $req (i32.add (local.get $req) (i32.const 1)))
        (br $scan)))
    (local.set $req (i32.add (local.get $req) (i32.const 1)))
    ;; ... and ends before the closing bracket
    (local.set $len (i32.sub (i32.sub (i32.add (local.get $in) (local.get $n)) (i32.const 1))
                             (local.get $req)))
    (local.set $out (call $out_buffer (global.get $cap)))
    (local.set $r (i32.const -100))
    (if (i32.eq (local.get $op) (i32.const 114))  ;; r
      (then (local.set $r (call $readMemory (local.get $req) (local.get $len) (local.get $out)
                                            (global.get $cap)))))
    (if (i32.eq (local.get $op) (i32.const 119))  ;; w
      (then (local.set $r (call $writeMemory (local.get $req) (local.get $len) (local.get $out)
                                             (global.get $cap)))))
    (if (i32.eq (local.get $op) (i32.const 113))  ;; q
      (then (local.set $r (call $queryMemory (local.get $req) (local.get $len) (local.get $out)
                                             (global.get $cap)))))
    (if (i32.eq (local.get $op) (i32.const 100))  ;; d
      (then (local.set $r (call $deleteMemory (local.get $req) (local.get $len) (local.get $out)
                                              (global.get $cap)))))
    (call $begin (i32.add (global.get $cap) (i32.const 64)))
    (call $result_json (local.get $r) (local.get $out))
    (call $end))
)
