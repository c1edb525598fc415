//! Audio for sensor TX as HSB's audio players prepare it: a 24-bit PCM WAV file becomes
//! I2S slots of 4 bytes per sample (the three sample bytes, then a zero byte), sent in
//! chunks of a fixed size (192 bytes by default), the last one padded with zeros.
//!
//! ```
//! use rocelink_hsb::audio::Wav;
//! // a 2-channel, 48 kHz, 24-bit file with one frame
//! let mut f = Vec::new();
//! let fmt = [1u16.to_le_bytes(), 2u16.to_le_bytes()].concat();
//! f.extend_from_slice(b"RIFF");
//! f.extend_from_slice(&42u32.to_le_bytes());
//! f.extend_from_slice(b"WAVEfmt ");
//! f.extend_from_slice(&16u32.to_le_bytes());
//! f.extend_from_slice(&fmt);
//! f.extend_from_slice(&48_000u32.to_le_bytes());
//! f.extend_from_slice(&288_000u32.to_le_bytes());
//! f.extend_from_slice(&6u16.to_le_bytes());
//! f.extend_from_slice(&24u16.to_le_bytes());
//! f.extend_from_slice(b"data");
//! f.extend_from_slice(&6u32.to_le_bytes());
//! f.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
//! let wav = Wav::parse(&f).unwrap();
//! assert_eq!(wav.i2s().unwrap(), [1, 2, 3, 0, 4, 5, 6, 0]);
//! assert_eq!(wav.i2s_bytes_per_second(), 384_000);
//! ```

/// The chunk size of HSB's audio players (bytes per packet).
pub const DEFAULT_CHUNK: usize = 192;

/// Why a file is not audio HSB can play.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum AudioError {
    /// Not a RIFF/WAVE file.
    #[error("not a WAV file (no RIFF/WAVE header)")]
    NotWav,
    /// A chunk runs past the end of the file.
    #[error("WAV file truncated: the {0} chunk runs past the end")]
    Truncated(&'static str),
    /// A chunk is missing.
    #[error("WAV file has no {0} chunk")]
    Missing(&'static str),
    /// Not uncompressed PCM.
    #[error("WAV format tag {0} is not PCM (1); HSB plays uncompressed 24-bit PCM")]
    NotPcm(u16),
    /// Not 24 bits per sample.
    #[error(
        "WAV samples are {0}-bit; HSB's audio path plays 24-bit samples (convert with `sox IN -b 24 OUT.wav`)"
    )]
    Depth(u16),
    /// No channels or no sample rate.
    #[error("WAV header has {channels} channels at {rate} Hz")]
    Header {
        /// Channels.
        channels: u16,
        /// Sample rate.
        rate: u32,
    },
}

/// A parsed PCM WAV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wav {
    /// Format tag (1 = PCM).
    pub format: u16,
    /// Channels.
    pub channels: u16,
    /// Frames per second.
    pub sample_rate: u32,
    /// Bits per sample.
    pub bits: u16,
    /// The sample bytes of the `data` chunk.
    pub data: Vec<u8>,
}

fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Wav {
    /// Parse a RIFF/WAVE file: the `fmt ` and `data` chunks wherever they are (other
    /// chunks such as `LIST` are skipped).
    pub fn parse(bytes: &[u8]) -> Result<Wav, AudioError> {
        if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
            return Err(AudioError::NotWav);
        }
        let mut fmt: Option<&[u8]> = None;
        let mut data: Option<&[u8]> = None;
        let mut at = 12;
        while at + 8 <= bytes.len() {
            let id = &bytes[at..at + 4];
            let len = le32(&bytes[at + 4..at + 8]) as usize;
            let body = at + 8;
            let end = body.checked_add(len).filter(|&e| e <= bytes.len());
            match id {
                b"fmt " => {
                    let end = end.ok_or(AudioError::Truncated("fmt"))?;
                    fmt = Some(&bytes[body..end]);
                }
                b"data" => {
                    // a writer that never patched the length leaves it too large: take
                    // what is there only if the length is the streaming marker
                    let end = match end {
                        Some(e) => e,
                        None if len == u32::MAX as usize || len == 0 => bytes.len(),
                        None => return Err(AudioError::Truncated("data")),
                    };
                    data = Some(&bytes[body..end]);
                }
                _ => {}
            }
            let Some(end) = end else { break };
            at = end + (len & 1); // chunks are word aligned
        }
        let fmt = fmt.ok_or(AudioError::Missing("fmt"))?;
        if fmt.len() < 16 {
            return Err(AudioError::Truncated("fmt"));
        }
        let data = data.ok_or(AudioError::Missing("data"))?;
        let mut format = le16(&fmt[0..2]);
        let bits = le16(&fmt[14..16]);
        // WAVE_FORMAT_EXTENSIBLE carries the real tag in its sub-format GUID
        if format == 0xFFFE && fmt.len() >= 26 {
            format = le16(&fmt[24..26]);
        }
        Ok(Wav {
            format,
            channels: le16(&fmt[2..4]),
            sample_rate: le32(&fmt[4..8]),
            bits,
            data: data.to_vec(),
        })
    }

    /// Check the file is what HSB plays: PCM, 24-bit, at least one channel, a rate.
    pub fn check(&self) -> Result<(), AudioError> {
        if self.format != 1 {
            return Err(AudioError::NotPcm(self.format));
        }
        if self.bits != 24 {
            return Err(AudioError::Depth(self.bits));
        }
        if self.channels == 0 || self.sample_rate == 0 {
            return Err(AudioError::Header {
                channels: self.channels,
                rate: self.sample_rate,
            });
        }
        Ok(())
    }

    /// The I2S stream: each 3-byte sample followed by a zero byte, whole frames only (a
    /// trailing partial frame is left out, as HSB's packetizer does).
    pub fn i2s(&self) -> Result<Vec<u8>, AudioError> {
        self.check()?;
        let frame = 3 * usize::from(self.channels);
        let frames = self.data.len() / frame;
        let mut out = Vec::with_capacity(frames * frame / 3 * 4);
        for s in self.data[..frames * frame].chunks_exact(3) {
            out.extend_from_slice(s);
            out.push(0);
        }
        Ok(out)
    }

    /// I2S bytes per second of playback (4 bytes per sample per channel).
    pub fn i2s_bytes_per_second(&self) -> u64 {
        u64::from(self.sample_rate) * u64::from(self.channels) * 4
    }
}

/// `stream` cut into packets of `chunk` bytes, borrowed from it; with `pad`, the last one
/// is filled up with zeros to `chunk` (HSB's packetizer, the only copy), otherwise it is
/// short.
pub fn chunks(
    stream: &[u8],
    chunk: usize,
    pad: bool,
) -> impl Iterator<Item = std::borrow::Cow<'_, [u8]>> + '_ {
    let chunk = chunk.max(1);
    stream.chunks(chunk).map(move |c| {
        if pad && c.len() < chunk {
            let mut v = c.to_vec();
            v.resize(chunk, 0);
            std::borrow::Cow::Owned(v)
        } else {
            std::borrow::Cow::Borrowed(c)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(format: u16, channels: u16, bits: u16, data: &[u8], extra_chunk: bool) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(b"RIFF\0\0\0\0WAVE");
        if extra_chunk {
            f.extend_from_slice(b"LIST");
            f.extend_from_slice(&3u32.to_le_bytes());
            f.extend_from_slice(b"abc\0"); // odd length, padded
        }
        f.extend_from_slice(b"fmt ");
        f.extend_from_slice(&16u32.to_le_bytes());
        f.extend_from_slice(&format.to_le_bytes());
        f.extend_from_slice(&channels.to_le_bytes());
        f.extend_from_slice(&44_100u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(&bits.to_le_bytes());
        f.extend_from_slice(b"data");
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn samples_are_padded_to_four_bytes() {
        let w = Wav::parse(&wav(1, 1, 24, &[1, 2, 3, 4, 5, 6, 7], true)).unwrap();
        assert_eq!(w.channels, 1);
        assert_eq!(w.sample_rate, 44_100);
        // the 7th byte is a partial sample: left out
        assert_eq!(w.i2s().unwrap(), [1, 2, 3, 0, 4, 5, 6, 0]);
        assert_eq!(w.i2s_bytes_per_second(), 44_100 * 4);
    }

    #[test]
    fn what_hsb_cannot_play_is_named() {
        let e = |f: Vec<u8>| Wav::parse(&f).and_then(|w| w.i2s()).unwrap_err();
        assert_eq!(e(wav(1, 2, 16, &[0; 8], false)), AudioError::Depth(16));
        assert_eq!(e(wav(3, 2, 24, &[0; 6], false)), AudioError::NotPcm(3));
        assert_eq!(e(b"RIFX....WAVE".to_vec()), AudioError::NotWav);
        assert_eq!(e(b"RIFF\0\0\0\0WAVE".to_vec()), AudioError::Missing("fmt"));
        let mut cut = wav(1, 2, 24, &[0; 12], false);
        cut.truncate(cut.len() - 5);
        assert_eq!(e(cut), AudioError::Truncated("data"));
        assert!(
            Wav::parse(&wav(1, 2, 24, &[0; 6], false))
                .unwrap()
                .i2s()
                .is_ok()
        );
    }

    #[test]
    fn chunking_pads_the_last_packet_only_when_asked() {
        let s: Vec<u8> = (1..=10).collect();
        let padded: Vec<Vec<u8>> = chunks(&s, 4, true).map(|c| c.into_owned()).collect();
        assert_eq!(
            padded,
            [vec![1, 2, 3, 4], vec![5, 6, 7, 8], vec![9, 10, 0, 0]]
        );
        let raw: Vec<Vec<u8>> = chunks(&s, 4, false).map(|c| c.into_owned()).collect();
        assert_eq!(raw.last().unwrap(), &vec![9, 10]);
        assert_eq!(raw.concat(), s);
    }
}
