//! The EXAMPLES section of every command's `--help` (and its man page), each a few
//! commands that work as written on one machine.

/// (command path, examples) — the path as typed after `rocelink`.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "verbs",
        "rocelink verbs devices --ip 127.0.0.2,127.0.0.3\n\
         rocelink verbs --ip 127.0.0.2 -- ib_write_bw &          # a perftest server on rocelink0\n\
         rocelink verbs --ip 127.0.0.3 -- ib_write_bw 127.0.0.2  # its client\n\
         rocelink verbs --ip 10.77.0.1 -- ibv_rc_pingpong -g 0",
    ),
    (
        "bench verbs",
        "rocelink bench verbs                            # write_bw, send_bw, write_lat; 5 runs\n\
         rocelink bench verbs write_lat --runs 9 --json",
    ),
    (
        "verbs devices",
        "rocelink verbs devices\n\
         rocelink verbs devices --ip 127.0.0.2 --json",
    ),
    (
        "demo",
        "rocelink demo                                   # 30 IMX274 1080p frames, each verified\n\
         rocelink demo --frames 60 --record rec --snapshot last.png\n\
         rocelink demo --sensor imx274-4k-raw10 --json | head -3",
    ),
    (
        "emulate",
        "rocelink emulate --ip 127.0.0.2 --sensor imx274-1080p-raw10\n\
         rocelink emulate --ip 127.0.0.2 --cameras 2 --ptp-sync-after 2\n\
         sudo ip netns exec rl-dev rocelink emulate --ip 10.77.0.1 --xdp rl-dev0   # scripts/veth-pair up",
    ),
    (
        "receive",
        "rocelink receive --device 127.0.0.2 --frame-size 2611376 --frames 30\n\
         rocelink receive --device 127.0.0.2 --camera imx274 --mode 1080p --record rec --snapshot last.png\n\
         rocelink receive --device 192.168.0.2 --vp 0,1 --pin-cpu 0,1 --json",
    ),
    (
        "enumerate",
        "rocelink enumerate --timeout 3\n\
         rocelink enumerate --json",
    ),
    (
        "set-ip",
        "rocelink set-ip 00:11:22:33:44:55 192.168.0.2 --host-ip 192.168.0.101",
    ),
    (
        "read",
        "rocelink read --device 127.0.0.2 0x80          # the HSB IP version\n\
         rocelink read --device 127.0.0.2 0x80 --count 4",
    ),
    (
        "write",
        "rocelink write --device 127.0.0.2 0x1000 0x55\n\
         rocelink write --device 127.0.0.2 0x1000 1 2 3   # one block write",
    ),
    (
        "i2c",
        "rocelink i2c --device 127.0.0.2 0x70 --write 01              # enable camera 0 behind the expander\n\
         rocelink i2c --device 127.0.0.2 0x1a --write 3004 --read 1   # read IMX274 register 0x3004",
    ),
    ("reset", "rocelink reset --device 192.168.0.2 --timeout 30"),
    (
        "send-audio",
        "rocelink send-audio --device 127.0.0.2 tone.wav\n\
         rocelink send-audio --device 127.0.0.2 --raw --fast data.bin",
    ),
    (
        "inspect",
        "rocelink inspect rec\n\
         rocelink inspect rec --verify --json",
    ),
    (
        "export",
        "rocelink export rec --frame 5 --format png       # frame-5.png here\n\
         rocelink export rec --frame 5 --format npy -o f5.npy",
    ),
    (
        "decode",
        "rocelink decode capture.pcap\n\
         rocelink decode capture.pcap --hsb --json | head\n\
         rocelink decode capture.pcap --strict            # exit 1 on an ICRC failure",
    ),
    (
        "pingpong",
        "rocelink pingpong rc &                         # the server\n\
         rocelink pingpong rc 127.0.0.1 -n 1000 --check\n\
         rocelink pingpong ud 192.168.1.10 -s 1024        # against ibv_ud_pingpong",
    ),
    (
        "perf",
        "rocelink perf write_bw &                       # the server\n\
         rocelink perf write_bw 127.0.0.1 -s 65536\n\
         rocelink perf read_lat 192.168.1.10 -a           # against ib_read_lat over rxe",
    ),
    (
        "ims serve",
        "rocelink ims serve --ring 256M\n\
         rocelink ims serve --record rec --frames 1000\n\
         rocelink ims serve --rate 2 --max-workers 8",
    ),
    (
        "ims send",
        "rocelink ims send 127.0.0.1 --bytes 4G --json\n\
         rocelink ims send 127.0.0.1 --image6 --frames 1000\n\
         rocelink ims send 192.168.1.20 --bind 192.168.1.10 --packet 1408",
    ),
    (
        "probe",
        "rocelink probe                                  # 127.0.0.1: RoCE 4791, triggers on 4792\n\
         rocelink probe --bind 192.168.1.20 --allow 192.168.1.10 --samples 2000",
    ),
    (
        "shots",
        "rocelink shots --bind 127.0.0.2 --shots 1000 --trigger-hz 2000 --verify\n\
         rocelink shots --bind 127.0.0.2 --record shots --seconds 10",
    ),
    (
        "trigger",
        "rocelink trigger --bind 127.0.0.2 -n 1000\n\
         rocelink trigger --bind 127.0.0.2 --samples 500,1000,4000 --plot rtt.svg",
    ),
    (
        "stats",
        "rocelink stats                                  # every running rocelink process of this user\n\
         rocelink stats 12345 --watch 1\n\
         rocelink stats 12345 --prometheus",
    ),
    (
        "completions",
        "rocelink completions bash > ~/.local/share/bash-completion/completions/rocelink\n\
         rocelink completions zsh > ~/.zfunc/_rocelink",
    ),
    (
        "man",
        "rocelink man ~/.local/share/man/man1 && man rocelink-receive",
    ),
    (
        "bench stream",
        "rocelink bench stream --seconds 4 --rate 6.5 --frame 10406576 --payload 1408\n\
         rocelink bench stream --rate 6.5 --receivers sink,sink-ring,rocelink --runs 5\n\
         rocelink bench stream --no-loss --json",
    ),
    (
        "bench record",
        "rocelink bench record --dir /mnt/fast --frames 200",
    ),
    (
        "bench write-bw",
        "rocelink bench write-bw -s 65536 --runs 3",
    ),
    ("bench write-lat", "rocelink bench write-lat --runs 3"),
    (
        "bench perf",
        "rocelink bench perf --runs 3\n\
         rocelink bench perf write_bw read_lat --json",
    ),
    (
        "bench shots",
        "rocelink bench shots --samples 500,1000 --khz 1,5,10 --plot shots.svg",
    ),
];

/// `cmd` with every command's EXAMPLES section.
pub(crate) fn with_examples(cmd: clap::Command) -> clap::Command {
    EXAMPLES.iter().fold(cmd, |cmd, &(path, text)| {
        let parts: Vec<&str> = path.split(' ').collect();
        add(cmd, &parts, text)
    })
}

fn add(cmd: clap::Command, path: &[&str], text: &'static str) -> clap::Command {
    match path {
        [] => cmd.after_help(format!("EXAMPLES:\n{}", indent(text))),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |c| add(c, rest, text)),
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {}", l.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command that does something has examples, and every example names a command
    /// that exists.
    #[test]
    fn every_command_has_examples() {
        let cmd = super::with_examples(crate::Cli::command());
        let mut missing = Vec::new();
        fn walk(c: &clap::Command, path: String, missing: &mut Vec<String>) {
            let subs: Vec<_> = c
                .get_subcommands()
                .filter(|s| s.get_name() != "help" && !s.is_hide_set())
                .collect();
            if subs.is_empty() && !path.is_empty() && c.get_after_help().is_none() {
                missing.push(path.clone());
            }
            for s in subs {
                let p = if path.is_empty() {
                    s.get_name().to_string()
                } else {
                    format!("{path} {}", s.get_name())
                };
                walk(s, p, missing);
            }
        }
        walk(&cmd, String::new(), &mut missing);
        assert!(missing.is_empty(), "no EXAMPLES: {missing:?}");
        for (path, _) in super::EXAMPLES {
            let mut c = &cmd;
            for part in path.split(' ') {
                c = c
                    .find_subcommand(part)
                    .unwrap_or_else(|| panic!("examples for {path}: no such command"));
            }
        }
    }
}
