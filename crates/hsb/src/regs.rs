//! The HSB register map (`docs/reference/hsb.md`), as HSB IP 0x2602+ and
//! the HSB host software use it. All registers are 32-bit at 4-byte-aligned addresses.

/// HSB IP version (low 16 bits), e.g. 0x2606.
pub const HSB_IP_VERSION: u32 = 0x80;
/// FPGA build date.
pub const FPGA_DATE: u32 = 0x84;
/// Reset control: the host writes 0x8←0, 0x8←3, then 0x4←0x8 (no reply expected).
pub const RESET_CTRL: u32 = 0x04;
/// Reset helper register.
pub const RESET_AUX: u32 = 0x08;
/// PTP registers written at session start.
pub const PTP_REGS: [u32; 5] = [0x104, 0x10C, 0x110, 0x114, 0x118];
/// PTP profile.
pub const PTP_PROFILE: u32 = 0x108;
/// PTP domain.
pub const PTP_DOMAIN: u32 = 0x11C;
/// PTP sync status: `(v & 0xF) == 0xF` when synchronised.
pub const PTP_SYNC_STAT: u32 = 0x188;
/// Event rising-edge enable.
pub const CTRL_EVT_RISING: u32 = 0x204;
/// Event falling-edge enable.
pub const CTRL_EVT_FALLING: u32 = 0x208;
/// Event clear.
pub const CTRL_EVT_CLEAR: u32 = 0x20C;
/// Event destination MAC (low).
pub const CTRL_EVT_HOST_MAC_LOW: u32 = 0x210;
/// Event destination MAC (high).
pub const CTRL_EVT_HOST_MAC_HIGH: u32 = 0x214;
/// Event destination IP.
pub const CTRL_EVT_HOST_IP: u32 = 0x218;
/// Event destination UDP port (the host's async port).
pub const CTRL_EVT_HOST_UDP_PORT: u32 = 0x21C;
/// Event source UDP port (8432).
pub const CTRL_EVT_FPGA_UDP_PORT: u32 = 0x220;
/// APB interrupt enable.
pub const APB_INTERRUPT_EN: u32 = 0x224;
/// APB timeout.
pub const APB_TIMEOUT: u32 = 0x228;
/// Software event trigger.
pub const CTRL_EVT_SW_EVENT: u32 = 0x22C;
/// APB RAM (sequencer programs, event vectors).
pub const APB_RAM: u32 = 0x2000;
/// APB RAM size in bytes.
pub const APB_RAM_LEN: u32 = 0x1000;
/// First virtual-port register block.
pub const VP_BASE: u32 = 0x1000;
/// Stride between virtual ports.
pub const VP_STRIDE: u32 = 0x40;
/// Host interface (data plane) register block base.
pub const HIF_BASE: u32 = 0x0200_0300;
/// Stride between data planes.
pub const HIF_STRIDE: u32 = 0x1_0000;
/// Sensor interface register block base.
pub const SIF_BASE: u32 = 0x0100_0000;
/// Stride between sensor interfaces.
pub const SIF_STRIDE: u32 = 0x1_0000;
/// SPI/I2C controller block.
pub const CTRL_BUS_BASE: u32 = 0x0300_0000;
/// VSYNC block.
pub const VSYNC_BASE: u32 = 0x7000_0000;

/// Per-virtual-port register offsets (add to `VP_BASE + VP_STRIDE * vp`).
pub mod vp {
    /// Destination QP (24 bits).
    pub const QP: u32 = 0x00;
    /// R_Key.
    pub const RKEY: u32 = 0x04;
    /// Buffer base, low 32 bits (byte address, 128-aligned).
    pub const PAGE_LSB: u32 = 0x08;
    /// Buffer base, high 32 bits.
    pub const PAGE_MSB: u32 = 0x0C;
    /// Stride between frame buffers in 128-byte units.
    pub const PAGE_INC: u32 = 0x10;
    /// `pages - 1` (devices read start page bits 27:16, end page bits 11:0).
    pub const MAX_BUFF: u32 = 0x14;
    /// Frame (sensor window) size in bytes.
    pub const BUFFER_LENGTH: u32 = 0x18;
    /// Host MAC bytes 2..6.
    pub const HOST_MAC_LOW: u32 = 0x20;
    /// Host MAC bytes 0..2.
    pub const HOST_MAC_HIGH: u32 = 0x24;
    /// Host IPv4.
    pub const HOST_IP: u32 = 0x28;
    /// Host UDP port; bit 16 = `md_disable` (no separate metadata packet).
    pub const HOST_UDP_PORT: u32 = 0x2C;
    /// `{VLAN_EN[16], PCP[15:13], DEI[12], VID[11:0]}`.
    pub const VLAN: u32 = 0x34;
    /// Bytes of the block.
    pub const LEN: u32 = 0x40;
}

/// Per-data-plane register offsets (add to `HIF_BASE + HIF_STRIDE * dp`).
pub mod hif {
    /// Payload per packet in 128-byte pages.
    pub const PACKET_SIZE: u32 = 0x04;
    /// Device UDP source port of data packets (12288).
    pub const PACKET_UDP_PORT: u32 = 0x08;
    /// Enabled virtual ports (bit per VP).
    pub const VP_MASK: u32 = 0x0C;
    /// Bytes of the block.
    pub const LEN: u32 = 0x40;
}

/// Bit 16 of `HOST_UDP_PORT`: no separate metadata packet.
pub const MD_DISABLE: u32 = 1 << 16;

/// Address of VP register `off` of virtual port `vp`.
pub const fn vp_reg(vp: u32, off: u32) -> u32 {
    VP_BASE + VP_STRIDE * vp + off
}

/// Address of data-plane register `off` of data plane `dp`.
pub const fn hif_reg(dp: u32, off: u32) -> u32 {
    HIF_BASE + HIF_STRIDE * dp + off
}

/// Payload bytes per packet for a link MTU, in 128-byte pages, as the HSB host computes it:
/// `(mtu - 74) / 128` (74 = Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ICRC 4).
pub const fn packet_pages_for_mtu(mtu: u32) -> u32 {
    (mtu - 74) / 128
}

/// The I2C controller (HSB's `I2C_CTRL`), driven through sequencer programs.
pub mod i2c {
    /// The camera bus's I2C expander (a board part, selecting which camera answers).
    pub const EXPANDER_ADDRESS: u8 = 0x70;
    /// Base address of the controller.
    pub const BASE: u32 = 0x0300_0200;
    /// Control: START (bit 0), 10-bit address (bit 1), peripheral address in bits 22:16.
    pub const CONTROL: u32 = 0x00;
    /// Which bus the transaction runs on.
    pub const BUS_EN: u32 = 0x04;
    /// Write count in bits 8:0, read count in bits 24:16.
    pub const NUM_BYTES: u32 = 0x08;
    /// Clock divider (HSB writes 0x19 for 400 kHz).
    pub const CLK_CNT: u32 = 0x0C;
    /// Status: BUSY, FSM_ERR, I2C_ERR, NAK, DONE.
    pub const STATUS: u32 = 0x80;
    /// Data buffer: write bytes before, read bytes after a transaction.
    pub const DATA: u32 = 0x100;
    /// Bytes of the data buffer (the most one transaction moves each way).
    pub const BUFFER_LEN: u32 = 0x100;
    /// Control bit: start the transaction.
    pub const START: u32 = 1 << 0;
    /// Control bit: 10-bit addressing (not supported by HSB's host).
    pub const TEN_BIT: u32 = 1 << 1;
    /// Status bit: a transaction is running.
    pub const BUSY: u32 = 1 << 0;
    /// Status bit: the controller's state machine failed.
    pub const FSM_ERR: u32 = 1 << 1;
    /// Status bit: a bus error.
    pub const I2C_ERR: u32 = 1 << 2;
    /// Status bit: the peripheral did not acknowledge.
    pub const NAK: u32 = 1 << 3;
    /// Status bit: the transaction finished.
    pub const DONE: u32 = 1 << 4;
    /// The bus of the board's clock and power chips.
    pub const BL_BUS: u32 = 0;
    /// The camera bus.
    pub const CAM_BUS: u32 = 1;
}

/// Where a program for the software event lives in APB RAM (HSB's host uses `APB_RAM +
/// 0x800`), and HSB's null sequence (`APB_RAM + 0x80`).
pub mod apb {
    /// Software-event program.
    pub const SW_PROGRAM: u32 = super::APB_RAM + 0x800;
    /// The do-nothing program unused events point at.
    pub const NULL_PROGRAM: u32 = super::APB_RAM + 0x80;
    /// Vector (program address) of event `bit`.
    pub const fn vector(bit: u32) -> u32 {
        super::APB_RAM + 4 * bit
    }
}

/// The I2S audio peripheral behind sensor TX port 0 (HSB's `Hololink::I2s`).
pub mod i2s {
    /// Clock gate shared with VSYNC/GPIO mux: OR in [`CLOCK_ENABLE`].
    pub const CLOCK_CTRL: u32 = 0x7000_0014;
    /// Bits that feed the reference clock into the I2S block.
    pub const CLOCK_ENABLE: u32 = 0xF;
    /// The I2S APB block: CTRL0 … CTRL8, then STAT0 … STAT3.
    pub const APB: u32 = 0x8000_0000;
    /// Bytes of the APB block.
    pub const APB_LEN: u32 = 0x34;
    /// CTRL0: bit 0 TX enable, bit 1 RX enable.
    pub const CTRL0: u32 = APB;
    /// CTRL1: MCLK divider (MCLK = REF_CLK / value; 0 is invalid).
    pub const CTRL1: u32 = APB + 0x04;
    /// CTRL2: BCLK divider select (BCLK = MCLK / 2^value, 0..=8).
    pub const CTRL2: u32 = APB + 0x08;
    /// CTRL3: bit depth in 1:0 (0b10 = 24-bit), data format in 3:2 (0 = I2S).
    pub const CTRL3: u32 = APB + 0x0C;
    /// CTRL4: bit 0 mono, bit 2 loopback.
    pub const CTRL4: u32 = APB + 0x10;
    /// CTRL5: unused by the FPGA; HSB writes 0x40.
    pub const CTRL5: u32 = APB + 0x14;
    /// CTRL7: bit 0 LRCLK polarity.
    pub const CTRL7: u32 = APB + 0x1C;
    /// CTRL8: slot mode (1 after reset).
    pub const CTRL8: u32 = APB + 0x20;
    /// STAT0: bit 0 clock locked (always 1 on today's FPGA).
    pub const STAT0: u32 = APB + 0x24;
    /// STAT2: bit 0 TX underrun, bit 1 RX overrun.
    pub const STAT2: u32 = APB + 0x2C;
    /// The host-side TX FIFO between the RoCE port and the I2S block.
    pub const TX_FIFO: u32 = 0x0120_0000;
    /// Bytes of the TX FIFO block.
    pub const TX_FIFO_LEN: u32 = 0x10;
    /// TX FIFO control: 4 starts it, 3 pauses it.
    pub const TX_FIFO_CTRL: u32 = TX_FIFO;
    /// TX FIFO almost-full threshold (HSB: 0x800).
    pub const TX_FIFO_ALMOST_FULL: u32 = TX_FIFO + 0x04;
    /// TX FIFO almost-empty threshold (HSB: 0x400).
    pub const TX_FIFO_ALMOST_EMPTY: u32 = TX_FIFO + 0x08;
    /// TX FIFO value: start.
    pub const FIFO_START: u32 = 4;
}
