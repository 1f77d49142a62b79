//! How many GPUs a submission asks for, from every form Slurm takes.
//!
//! Rule: a job's GPUs at submission are the most that any one of its GPU
//! requests asks for in all, since Slurm gives one allocation that meets
//! every request it was given (`--gpus=8 --gpus-per-node=4 -N 2` is 8 GPUs,
//! not 16):
//! - per job (`--gpus`, `tres_per_job`): its count;
//! - per node (`--gres=gpu...`, `--gpus-per-node`, `tres_per_node`): times
//!   `--nodes` (`min_nodes`);
//! - per task (`--gpus-per-task`, `tres_per_task`): times `-n`
//!   (`num_tasks`), else `--ntasks-per-node` times `--nodes`, else one task
//!   per node;
//! - per socket (`--gpus-per-socket`, `tres_per_socket`): times
//!   `--sockets-per-node` times `--nodes`.
//!
//! What the request does not say is taken at the least it guarantees, so a
//! count is never above what Slurm will allocate: one node without
//! `--nodes`, one socket per node without `--sockets-per-node` (22.05
//! refuses `--gpus-per-socket` without it; the job gets at least one
//! socket's GPUs on each node), one task per node without a task count
//! (slurmctld refuses `--gpus-per-task` without `-n` or `--gpus`).
//!
//! The same `job_desc_msg_t` fields carry these on Slurm 22.05 and 24.11;
//! the clients write their items differently (22.05 `gres:gpu:2`,
//! `gres:gpu:a100:2`; 24.11 `gres/gpu:2`, and in `tres_per_task`
//! `gres/gpu=2` or `gres/gpu:a100=2` beside `cpu=4`), and `--gres` is passed
//! as the user typed it (`gpu:2`). Every one of these is read.

/// A submission's GPU requests, as job_submit sees them in
/// `job_desc_msg_t` (`None`: not given).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GpuRequest<'a> {
    /// `--gpus` (`tres_per_job`).
    pub per_job: Option<&'a str>,
    /// `--gres=gpu...`, `--gpus-per-node` (`tres_per_node`).
    pub per_node: Option<&'a str>,
    /// `--gpus-per-task` (`tres_per_task`; 24.11 puts `cpu=N` there too).
    pub per_task: Option<&'a str>,
    /// `--gpus-per-socket` (`tres_per_socket`).
    pub per_socket: Option<&'a str>,
    /// `--nodes` minimum (`min_nodes`).
    pub nodes: Option<u32>,
    /// `-n`/`--ntasks` (`num_tasks`).
    pub tasks: Option<u32>,
    /// `--ntasks-per-node` (`ntasks_per_node`).
    pub tasks_per_node: Option<u16>,
    /// `--sockets-per-node` (`sockets_per_node`).
    pub sockets_per_node: Option<u16>,
}

/// GPUs in one TRES request string: the sum of its GPU items. An item is
/// `gres:gpu:2`, `gres/gpu:a100:2`, `gpu:2`, `gres/gpu=2` or
/// `gres/gpu:a100=2`; `gpu` alone, or with a type and no count, is 1.
/// Other items (`cpu=4`, `gres:shard:4`) and counts that do not parse count
/// nothing.
fn gpus_in(tres: &str) -> u64 {
    fn item(item: &str) -> Option<u64> {
        let item = item.trim();
        let rest = item
            .strip_prefix("gres:")
            .or_else(|| item.strip_prefix("gres/"))
            .unwrap_or(item)
            .strip_prefix("gpu")?;
        if rest.is_empty() {
            return Some(1);
        }
        // `:2`, `:a100:2`, `=2`, `:a100=2`; `:a100` (a type, no count) is one GPU.
        let last = rest.strip_prefix([':', '='])?.rsplit([':', '=']).next()?;
        match last.parse() {
            Ok(n) => Some(n),
            Err(_) if !last.is_empty() && !last.starts_with(|c: char| c.is_ascii_digit()) => {
                Some(1)
            }
            Err(_) => None,
        }
    }
    tres.split(',').filter_map(item).sum()
}

/// GPUs a job asks for at submission (module doc): the largest total of
/// its per-job, per-node, per-task and per-socket requests; 0 when it asks
/// for none.
pub fn gpus_at_submission(r: &GpuRequest<'_>) -> u64 {
    let count = |tres: Option<&str>| tres.map_or(0, gpus_in);
    let nodes = u64::from(r.nodes.unwrap_or(1).max(1));
    let tasks = match (r.tasks, r.tasks_per_node) {
        (Some(n), _) if n > 0 => u64::from(n),
        (_, Some(per_node)) if per_node > 0 => u64::from(per_node).saturating_mul(nodes),
        _ => nodes,
    };
    let sockets = u64::from(r.sockets_per_node.unwrap_or(1).max(1)).saturating_mul(nodes);
    [
        count(r.per_job),
        count(r.per_node).saturating_mul(nodes),
        count(r.per_task).saturating_mul(tasks),
        count(r.per_socket).saturating_mul(sockets),
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per_job(tres: &str) -> u64 {
        gpus_at_submission(&GpuRequest {
            per_job: Some(tres),
            ..Default::default()
        })
    }

    fn per_node(tres: &str, nodes: Option<u32>) -> u64 {
        gpus_at_submission(&GpuRequest {
            per_node: Some(tres),
            nodes,
            ..Default::default()
        })
    }

    #[test]
    fn items_as_the_clients_send_them() {
        // 22.05 writes `gres:gpu`, 24.11 `gres/gpu`; --gres is passed as given.
        assert_eq!(per_job("gres:gpu:2"), 2);
        assert_eq!(per_job("gres/gpu:2"), 2);
        assert_eq!(per_node("gres/gpu:a100:2", Some(3)), 6);
        assert_eq!(per_node("gpu:1", None), 1);
        assert_eq!(per_node("gres/gpu=4", None), 4);
        assert_eq!(per_node("gres:gpu", None), 1);
        assert_eq!(per_node("gres:gpu:a100", None), 1);
        assert_eq!(per_node("gres:gpu:1,gres:nic:2", None), 1);
        assert_eq!(per_node("gres:gpus:2,gres:shard:4", None), 0);
        assert_eq!(
            gpus_at_submission(&GpuRequest {
                nodes: Some(2),
                ..Default::default()
            }),
            0
        );
        // `x2` is a GPU type (one GPU); a count that does not parse counts none.
        assert_eq!(per_job("gres:gpu:x2"), 1);
        assert_eq!(per_job("gres:gpu:2x"), 0);
    }

    #[test]
    fn gpus_per_task_count_once_per_task() {
        // Issue 39: `-n 8 --gpus-per-task=1` counted 0 GPUs (debug work, a
        // possible sweep) while slurmctld allocates 8.
        let eight_tasks = |per_task| GpuRequest {
            per_task: Some(per_task),
            tasks: Some(8),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&eight_tasks("gres:gpu:1")), 8); // 22.05
        assert_eq!(gpus_at_submission(&eight_tasks("gres/gpu=1")), 8); // 24.11
        assert_eq!(
            gpus_at_submission(&eight_tasks("cpu=4,gres/gpu:a100=2")),
            16
        );
        assert_eq!(gpus_at_submission(&eight_tasks("gres:gpu:a100:1")), 8);
        // No -n: --ntasks-per-node x --nodes, else one task per node.
        let r = GpuRequest {
            per_task: Some("gres/gpu=2"),
            tasks_per_node: Some(4),
            nodes: Some(2),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 16);
        let r = GpuRequest {
            per_task: Some("gres/gpu=2"),
            nodes: Some(3),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 6);
        // 24.11's tres_per_task of a CPU-only job holds no GPU.
        assert_eq!(gpus_at_submission(&eight_tasks("cpu=4")), 0);
    }

    #[test]
    fn gpus_per_socket_count_per_socket_per_node() {
        let r = GpuRequest {
            per_socket: Some("gres:gpu:2"),
            sockets_per_node: Some(2),
            nodes: Some(3),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 12);
        // Without --sockets-per-node: the one socket per node it is sure of.
        let r = GpuRequest {
            per_socket: Some("gres/gpu:2"),
            nodes: Some(3),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 6);
    }

    #[test]
    fn several_forms_are_one_allocation() {
        // --gpus=8 --gpus-per-node=4 -N 2: 8, not 16.
        let r = GpuRequest {
            per_job: Some("gres:gpu:8"),
            per_node: Some("gres:gpu:4"),
            nodes: Some(2),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 8);
        // --gpus=2 with --gpus-per-node=4 -N 2: the per-node request is the larger.
        let r = GpuRequest {
            per_job: Some("gres/gpu:2"),
            per_node: Some("gres/gpu:4"),
            nodes: Some(2),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 8);
        // --gpus=4 --gpus-per-task=1 (-n derived by slurmctld): 4.
        let r = GpuRequest {
            per_job: Some("gres/gpu:4"),
            per_task: Some("gres/gpu=1"),
            ..Default::default()
        };
        assert_eq!(gpus_at_submission(&r), 4);
    }
}
