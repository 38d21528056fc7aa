//! Any bytes given to the pipeline's state decoders (the run state committed with each batch
//! and the engine snapshot inside it): an error or a state, never a panic. A snapshot that
//! restores must snapshot again to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark_stream::config::Config;
use tidemark_stream::engine::Engine;
use tidemark_stream::flowgen::FANOUT_CONFIG;
use tidemark_stream::pipeline::RunState;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = RunState::from_bytes(data) {
        assert_eq!(RunState::from_bytes(&s.to_bytes()).as_ref(), Ok(&s));
    }
    let config = Config::from_toml(FANOUT_CONFIG).expect("the built-in config is valid");
    if let Ok(e) = Engine::restore(&config, data, &mut |_, _, _, _| {}) {
        let again = e.snapshot();
        let e2 = Engine::restore(&config, &again, &mut |_, _, _, _| {}).expect("re-snapshot restores");
        assert_eq!(e2.snapshot(), again);
    }
});
