;; harness: not a real gene.  It forwards exported calls straight to the host
;; functions, so tests (and the fuzz test) can hit them with any pointers,
;; lengths and bytes they like; express returns whatever set_result stored
;; (by default a pointer to "{}").  No alloc: the input lands at offset 0.
(module
  (import "rotifer" "readMemory" (func $read (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "writeMemory" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "queryMemory" (func $query (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "deleteMemory" (func $delete (param i32 i32 i32 i32) (result i32)))
  (import "rotifer" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $result (mut i32) (i32.const 65520))
  (data (i32.const 65520) "{}\00")

  (func (export "express") (param i32 i32) (result i32) (global.get $result))
  (func (export "set_result") (param i32) (global.set $result (local.get 0)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
  (func (export "call_read") (param i32 i32 i32 i32) (result i32)
    (call $read (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "call_write") (param i32 i32 i32 i32) (result i32)
    (call $write (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "call_query") (param i32 i32 i32 i32) (result i32)
    (call $query (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "call_delete") (param i32 i32 i32 i32) (result i32)
    (call $delete (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "call_log") (param i32 i32 i32)
    (call $log (local.get 0) (local.get 1) (local.get 2)))
)
