;; prefs: the seed's "formatter remembers the indent" example, in hand-written WAT.
;; Input {"indent": n} stores n (as decimal text) under the PREFERENCE key
;; "formatter/indent" and outputs {"indent": n}; any other input reads it back
;; and outputs {"indent": saved}, or {"indent": 2} when nothing is saved.
;; A refused memory call's error body is returned as the output, so the
;; runtime reports the input as rejected with the memory's code.
(module
  (import "rotifer" "readMemory" (func $readMemory (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "writeMemory" (func $writeMemory (param i32 i32 i32 i32) (result i32)))
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

  (data (i32.const 1280) "\"indent\"\00")
  (data (i32.const 1536) "{\"key\":\"formatter/indent\",\"category\":\"PREFERENCE\",\"value\":\"\00")
  (data (i32.const 1792) "\"}\00")
  (data (i32.const 2048) "{\"key\":\"formatter/indent\",\"category\":\"PREFERENCE\"}\00")
  (data (i32.const 2304) "\"value\":\"\00")
  (data (i32.const 2560) "{\"indent\":\00")
  (data (i32.const 2816) "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

  ;; append base64 of [$p, $p + $n)
  (func $b64 (param $p i32) (param $n i32)
    (local $i i32) (local $v i32) (local $rest i32)
    (block $done
      (loop $group
        (local.set $rest (i32.sub (local.get $n) (local.get $i)))
        (br_if $done (i32.le_s (local.get $rest) (i32.const 0)))
        (local.set $v (i32.shl (i32.load8_u (i32.add (local.get $p) (local.get $i))) (i32.const 16)))
        (if (i32.gt_s (local.get $rest) (i32.const 1))
          (then (local.set $v (i32.or (local.get $v)
            (i32.shl (i32.load8_u (i32.add (local.get $p) (i32.add (local.get $i) (i32.const 1))))
                     (i32.const 8))))))
        (if (i32.gt_s (local.get $rest) (i32.const 2))
          (then (local.set $v (i32.or (local.get $v)
            (i32.load8_u (i32.add (local.get $p) (i32.add (local.get $i) (i32.const 2))))))))
        (call $byte (i32.load8_u (i32.add (i32.const 2816) (i32.shr_u (local.get $v) (i32.const 18)))))
        (call $byte (i32.load8_u (i32.add (i32.const 2816)
          (i32.and (i32.shr_u (local.get $v) (i32.const 12)) (i32.const 63)))))
        (if (i32.gt_s (local.get $rest) (i32.const 1))
          (then (call $byte (i32.load8_u (i32.add (i32.const 2816)
            (i32.and (i32.shr_u (local.get $v) (i32.const 6)) (i32.const 63))))))
          (else (call $byte (i32.const 61))))
        (if (i32.gt_s (local.get $rest) (i32.const 2))
          (then (call $byte (i32.load8_u (i32.add (i32.const 2816)
            (i32.and (local.get $v) (i32.const 63))))))
          (else (call $byte (i32.const 61))))
        (local.set $i (i32.add (local.get $i) (i32.const 3)))
        (br $group))))

  (func $b64val (param $c i32) (result i32)
    (if (i32.and (i32.ge_u (local.get $c) (i32.const 65)) (i32.le_u (local.get $c) (i32.const 90)))
      (then (return (i32.sub (local.get $c) (i32.const 65)))))
    (if (i32.and (i32.ge_u (local.get $c) (i32.const 97)) (i32.le_u (local.get $c) (i32.const 122)))
      (then (return (i32.sub (local.get $c) (i32.const 71)))))
    (if (i32.and (i32.ge_u (local.get $c) (i32.const 48)) (i32.le_u (local.get $c) (i32.const 57)))
      (then (return (i32.add (local.get $c) (i32.const 4)))))
    (if (i32.eq (local.get $c) (i32.const 43)) (then (return (i32.const 62))))
    (if (i32.eq (local.get $c) (i32.const 47)) (then (return (i32.const 63))))
    (i32.const -1))

  ;; decode base64 from $p up to the first byte outside the alphabet into $dst;
  ;; returns the number of bytes decoded
  (func $unb64 (param $p i32) (param $dst i32) (result i32)
    (local $acc i32) (local $bits i32) (local $v i32) (local $n i32)
    (block $done
      (loop $next
        (local.set $v (call $b64val (i32.load8_u (local.get $p))))
        (br_if $done (i32.lt_s (local.get $v) (i32.const 0)))
        (local.set $acc (i32.or (i32.shl (local.get $acc) (i32.const 6)) (local.get $v)))
        (local.set $bits (i32.add (local.get $bits) (i32.const 6)))
        (if (i32.ge_u (local.get $bits) (i32.const 8))
          (then
            (local.set $bits (i32.sub (local.get $bits) (i32.const 8)))
            (i32.store8 (i32.add (local.get $dst) (local.get $n))
                        (i32.shr_u (local.get $acc) (local.get $bits)))
            (local.set $n (i32.add (local.get $n) (i32.const 1)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (local.get $n))

  (func (export "express") (param $in i32) (param $n i32) (result i32)
    (local $at i32) (local $indent i32) (local $out i32) (local $r i32)
    (local $digits i32) (local $dn i32) (local $v i32)
    (local.set $out (call $out_buffer (i32.const 4096)))
    (local.set $at (call $find (local.get $in) (local.get $n) (i32.const 1280)))
    (if (i32.ge_s (local.get $at) (i32.const 0))
      (then
        (local.set $indent (call $int_at (i32.add (i32.add (local.get $in) (local.get $at)) (i32.const 8))
                                         (i32.add (local.get $in) (local.get $n))))
        ;; the value is the indent as decimal text
        (call $begin (i32.const 16))
        (call $int (local.get $indent))
        (local.set $digits (global.get $b))
        (local.set $dn (call $len))
        (call $begin (i32.const 256))
        (call $str (i32.const 1536))
        (call $b64 (local.get $digits) (local.get $dn))
        (call $str (i32.const 1792))
        (local.set $r (call $writeMemory (global.get $b) (call $len) (local.get $out) (i32.const 4096))))
      (else
        (call $begin (i32.const 128))
        (call $str (i32.const 2048))
        (local.set $r (call $readMemory (global.get $b) (call $len) (local.get $out) (i32.const 4096)))
        (local.set $indent (i32.const 2))
        (if (i32.gt_s (local.get $r) (i32.const 0))
          (then
            (local.set $at (call $find (local.get $out) (local.get $r) (i32.const 2304)))
            (if (i32.ge_s (local.get $at) (i32.const 0))
              (then
                (local.set $v (call $alloc (local.get $r)))
                (local.set $dn (call $unb64 (i32.add (i32.add (local.get $out) (local.get $at)) (i32.const 9))
                                            (local.get $v)))
                (local.set $indent (call $int_at (local.get $v) (i32.add (local.get $v) (local.get $dn))))))))))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then
        (if (i32.load8_u (local.get $out)) (then (return (local.get $out))))
        (return (local.get $r))))
    (call $begin (i32.const 64))
    (call $str (i32.const 2560))
    (call $int (local.get $indent))
    (call $byte (i32.const 125))
    (call $end))
)
