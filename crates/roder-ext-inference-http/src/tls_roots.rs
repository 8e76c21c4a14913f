//! Which certificate authorities the model clients trust. The system's
//! store, read by `rustls-platform-verifier`, when the machine has one; the
//! Mozilla roots built into the binary (`webpki-root-certs`) when it has
//! none, as in minimal or busybox task images that the static `roder`
//! (`scripts/build-static.sh`) is copied into. Without this fallback every
//! HTTPS request there would fail certificate verification.

use std::path::Path;

/// Where Linux distributions keep their CA bundle (the paths OpenSSL's own
/// probe and `rustls-native-certs` look at).
const BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/certs/ca-certificates.crt",
    "/usr/local/share/certs/ca-root-nss.crt",
];

/// Where the roots come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// The system's store (or `SSL_CERT_FILE`/`SSL_CERT_DIR`).
    System,
    /// The roots built into the binary: the system has no store.
    BuiltIn,
}

/// Decides from the environment and which bundle files exist.
fn choose(env_names_a_store: bool, exists: impl Fn(&Path) -> bool) -> Roots {
    if env_names_a_store || BUNDLES.iter().any(|bundle| exists(Path::new(bundle))) {
        Roots::System
    } else {
        Roots::BuiltIn
    }
}

/// The roots this machine's clients use. A few `stat`s, once per client.
pub fn on_this_machine() -> Roots {
    let env_names_a_store = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
    choose(env_names_a_store, Path::is_file)
}

/// `builder` trusting the built-in roots when the machine has no store.
pub fn apply(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    match on_this_machine() {
        Roots::System => builder,
        Roots::BuiltIn => builder.tls_certs_only(built_in()),
    }
}

fn built_in() -> Vec<reqwest::Certificate> {
    webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_or_a_variable_keeps_the_system_store() {
        assert_eq!(
            choose(false, |path| path == Path::new("/etc/ssl/cert.pem")),
            Roots::System
        );
        assert_eq!(choose(true, |_| false), Roots::System);
    }

    #[test]
    fn no_store_at_all_uses_the_built_in_roots() {
        assert_eq!(choose(false, |_| false), Roots::BuiltIn);
    }

    #[test]
    fn every_built_in_root_is_a_certificate_reqwest_takes() {
        let roots = built_in();
        assert_eq!(roots.len(), webpki_root_certs::TLS_SERVER_ROOT_CERTS.len());
        assert!(roots.len() > 100, "{} roots", roots.len());
        let client = reqwest::Client::builder().tls_certs_only(roots).build();
        assert!(client.is_ok(), "{client:?}");
    }
}
