//! The command line (being assembled; see docs/architecture.md).

pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
