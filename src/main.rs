//! The `whilly` binary: a thin edge over the library (`whilly::cli`).

fn main() -> std::process::ExitCode {
    whilly::cli::main()
}
