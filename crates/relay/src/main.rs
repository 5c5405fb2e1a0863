//! `sealpost-relay`: parses arguments and hands over to the library.

// A request allocates many short-lived buffers (bodies, envelopes, rows) on whichever core
// runs it; mimalloc serves them from per-thread pages, where the system allocator's arenas
// spent about a tenth of the relay's CPU under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sealpost_relay::cli::main()
}
