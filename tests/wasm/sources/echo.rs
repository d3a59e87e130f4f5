//! A WASI command gene in Rust: echoes its input (stdin) to stdout.
use std::io::{Read, Write};

fn main() {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).unwrap();
    eprintln!("rust echo read {} bytes", input.len());
    std::io::stdout().write_all(&input).unwrap();
}
