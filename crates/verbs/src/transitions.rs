//! Which QP state changes `ibv_modify_qp` allows and which attributes each must, may and
//! may not carry, per QP type — the table of InfiniBand's QP state machine as Linux's
//! `ib_modify_qp_is_ok` has it (and so rxe, and every RNIC driver), restricted to the
//! states this device has (no SQD: draining the send queue is not offered).

use crate::abi::*;
use libc::c_int;
use rocelink_transport::QpType;

/// Attributes allowed in every transition that allows any (the state itself).
const STATE: c_int = IBV_QP_STATE;

/// Required and optional attributes of a transition, for UD, UC and RC.
struct Rule {
    required: [c_int; 3],
    optional: [c_int; 3],
}

const fn same(m: c_int) -> [c_int; 3] {
    [m, m, m]
}

const NONE: Rule = Rule {
    required: same(0),
    optional: same(0),
};

fn index(t: QpType) -> usize {
    match t {
        QpType::Ud => 0,
        QpType::Uc => 1,
        QpType::Rc => 2,
    }
}

/// The rule of `cur → next`, if the transition exists.
fn rule(cur: u32, next: u32) -> Option<Rule> {
    const PKP: c_int = IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    Some(match (cur, next) {
        // to RESET or ERR from anywhere
        (_, IBV_QPS_RESET | IBV_QPS_ERR) if cur <= IBV_QPS_ERR => NONE,
        (IBV_QPS_RESET, IBV_QPS_INIT) => Rule {
            required: [
                PKP | IBV_QP_QKEY,
                PKP | IBV_QP_ACCESS_FLAGS,
                PKP | IBV_QP_ACCESS_FLAGS,
            ],
            optional: same(0),
        },
        (IBV_QPS_INIT, IBV_QPS_INIT) => Rule {
            required: same(0),
            optional: [
                PKP | IBV_QP_QKEY,
                PKP | IBV_QP_ACCESS_FLAGS,
                PKP | IBV_QP_ACCESS_FLAGS,
            ],
        },
        (IBV_QPS_INIT, IBV_QPS_RTR) => {
            const UC: c_int = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
            Rule {
                required: [0, UC, UC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER],
                optional: [
                    IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
                    IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
                    IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
                ],
            }
        }
        (IBV_QPS_RTR, IBV_QPS_RTS) => Rule {
            required: [
                IBV_QP_SQ_PSN,
                IBV_QP_SQ_PSN,
                IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC,
            ],
            optional: [
                IBV_QP_CUR_STATE | IBV_QP_QKEY,
                IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE,
                IBV_QP_CUR_STATE
                    | IBV_QP_ALT_PATH
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_MIN_RNR_TIMER
                    | IBV_QP_PATH_MIG_STATE,
            ],
        },
        (IBV_QPS_RTS, IBV_QPS_RTS) => Rule {
            required: same(0),
            optional: [
                IBV_QP_CUR_STATE | IBV_QP_QKEY,
                IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE,
                IBV_QP_CUR_STATE
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_ALT_PATH
                    | IBV_QP_PATH_MIG_STATE
                    | IBV_QP_MIN_RNR_TIMER,
            ],
        },
        _ => return None,
    })
}

/// Check `cur → next` with attribute mask `mask` for a QP of type `t`: EINVAL for a
/// transition that does not exist, a required attribute missing or one not allowed;
/// EOPNOTSUPP for the send-queue-drain states (SQD, SQE), which this device lacks.
pub fn check(cur: u32, next: u32, t: QpType, mask: c_int) -> Result<(), i32> {
    if next == IBV_QPS_SQD || next == IBV_QPS_SQE {
        return Err(libc::EOPNOTSUPP);
    }
    if next > IBV_QPS_ERR {
        return Err(libc::EINVAL);
    }
    let r = rule(cur, next).ok_or(libc::EINVAL)?;
    let (req, opt) = (r.required[index(t)], r.optional[index(t)]);
    if mask & req != req || mask & !(req | opt | STATE) != 0 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RC_RTR: c_int = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;

    #[test]
    fn what_rc_pingpong_does_is_allowed() {
        let init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert_eq!(check(IBV_QPS_RESET, IBV_QPS_INIT, QpType::Rc, init), Ok(()));
        assert_eq!(check(IBV_QPS_INIT, IBV_QPS_RTR, QpType::Rc, RC_RTR), Ok(()));
        let rts = IBV_QP_STATE
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_SQ_PSN
            | IBV_QP_MAX_QP_RD_ATOMIC;
        assert_eq!(check(IBV_QPS_RTR, IBV_QPS_RTS, QpType::Rc, rts), Ok(()));
        // UD: Q_Key at INIT, nothing at RTR, the SQ PSN at RTS
        let ud_init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
        assert_eq!(
            check(IBV_QPS_RESET, IBV_QPS_INIT, QpType::Ud, ud_init),
            Ok(())
        );
        assert_eq!(
            check(IBV_QPS_INIT, IBV_QPS_RTR, QpType::Ud, IBV_QP_STATE),
            Ok(())
        );
        let ud_rts = IBV_QP_STATE | IBV_QP_SQ_PSN;
        assert_eq!(check(IBV_QPS_RTR, IBV_QPS_RTS, QpType::Ud, ud_rts), Ok(()));
    }

    #[test]
    fn a_missing_or_extra_attribute_or_a_skipped_state_is_refused() {
        // RC at RTR without the RNR timer
        let short = RC_RTR & !IBV_QP_MIN_RNR_TIMER;
        assert_eq!(
            check(IBV_QPS_INIT, IBV_QPS_RTR, QpType::Rc, short),
            Err(libc::EINVAL)
        );
        // UC does not take the RC-only attributes at RTR
        assert_eq!(
            check(IBV_QPS_INIT, IBV_QPS_RTR, QpType::Uc, RC_RTR),
            Err(libc::EINVAL)
        );
        // a Q_Key on an RC QP
        let qkey =
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY;
        assert_eq!(
            check(IBV_QPS_RESET, IBV_QPS_INIT, QpType::Rc, qkey),
            Err(libc::EINVAL)
        );
        // RESET straight to RTS
        assert_eq!(
            check(
                IBV_QPS_RESET,
                IBV_QPS_RTS,
                QpType::Ud,
                IBV_QP_STATE | IBV_QP_SQ_PSN
            ),
            Err(libc::EINVAL)
        );
        // back from RTS to RTR
        assert_eq!(
            check(IBV_QPS_RTS, IBV_QPS_RTR, QpType::Uc, IBV_QP_STATE),
            Err(libc::EINVAL)
        );
        // the drain states are not offered; an unknown state is an error
        assert_eq!(
            check(IBV_QPS_RTS, IBV_QPS_SQD, QpType::Rc, IBV_QP_STATE),
            Err(libc::EOPNOTSUPP)
        );
        assert_eq!(
            check(IBV_QPS_RTS, 9, QpType::Rc, IBV_QP_STATE),
            Err(libc::EINVAL)
        );
        // anything to RESET or ERR with no attributes
        for s in [
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPS_RTR,
            IBV_QPS_RTS,
            IBV_QPS_ERR,
        ] {
            assert_eq!(check(s, IBV_QPS_ERR, QpType::Rc, IBV_QP_STATE), Ok(()));
            assert_eq!(check(s, IBV_QPS_RESET, QpType::Ud, IBV_QP_STATE), Ok(()));
            assert_eq!(
                check(s, IBV_QPS_ERR, QpType::Rc, IBV_QP_STATE | IBV_QP_QKEY),
                Err(libc::EINVAL)
            );
        }
    }
}
