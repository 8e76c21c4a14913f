//! `roder-executor`: serves requests on stdin, replies on stdout, and
//! writes nothing else there. Diagnostics go to stderr.

fn main() {
    let stdout = std::io::stdout();
    if let Err(error) = roder_executor::server::serve(std::io::stdin(), stdout) {
        eprintln!("roder-executor: {error}");
        std::process::exit(1);
    }
}
