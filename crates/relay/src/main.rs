//! `sealpost-relay`: parses arguments and hands over to the library.

fn main() -> std::process::ExitCode {
    sealpost_relay::cli::main()
}
