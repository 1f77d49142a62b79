//! A preemptor's victims are on the node where it starts and none elsewhere.

use super::*;

/// A preemptor of half a node on a cluster full of quarter-node jobs whose
/// contracts have ended: it starts on one node, its victims are exactly the
/// two jobs that free its GPUs there, and no job on another node is touched,
/// though all of them are just as preemptable. The jobs are placed round
/// robin (`-w`), so consecutive job ids (the order of equal candidates) are
/// on different nodes: slurmctld tries candidates on several nodes before
/// one node has room, and must preempt only those on that node.
#[test]
fn a_preemptor_takes_its_victims_only_on_the_node_where_it_starts() {
    let _one = serial();
    let tb = Testbed::from_env();
    let nodes = tb.nodes();
    let g = tb.gpus_per_node();
    assert!(
        nodes.len() >= 2 && g.is_multiple_of(4),
        "this test needs 2 nodes or more of 4k GPUs, the testbed has {} x {g}",
        nodes.len()
    );
    let (_, _guard) = take_cluster(&tb);
    // b1 used 2 GPUs for 10 h: over-served, and above its entitlement once
    // it holds the whole cluster; b2 (equal share) holds nothing.
    tb.reset_ledger(&[("b1", 2, 12 * HOUR, 10 * HOUR, 3600)]);
    let per_node = 4;
    let victims_size = g / 4;
    let b1: Vec<u32> = (0..per_node * nodes.len())
        .map(|i| {
            tb.sbatch(&[
                "-w",
                &nodes[i % nodes.len()],
                &format!("--gres=gpu:{victims_size}"),
                "-A",
                "b1",
                "--min-runtime=0:03",
                "--wrap",
                "sleep 600",
            ])
        })
        .collect();
    for j in &b1 {
        tb.wait_state(*j, "RUNNING", Duration::from_secs(60));
    }
    // Where each runs, before anything moves.
    let placed: Vec<(u32, String)> = b1
        .iter()
        .map(|j| {
            let n = tb.job_nodes(*j);
            assert_eq!(n.len(), 1, "job {j} on one node: {n:?}");
            (*j, n[0].clone())
        })
        .collect();
    for node in &nodes {
        let here = placed.iter().filter(|(_, n)| n == node).count();
        assert_eq!(here, per_node, "{per_node} jobs on {node}: {placed:?}");
    }
    // Let the 3 s contracts end, then b2 asks for half a node.
    std::thread::sleep(Duration::from_secs(5));
    let b2 = tb.sbatch(&[
        &format!("--gres=gpu:{}", g / 2),
        "-A",
        "b2",
        "--min-runtime=5:00",
        "--wrap",
        "sleep 600",
    ]);
    tb.wait_state(b2, "RUNNING", Duration::from_secs(90));
    let at = tb.job_nodes(b2);
    assert_eq!(at.len(), 1, "{at:?}");
    let node = &at[0];
    // Further passes move nothing: b2 runs, b1 stays above its entitlement.
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        assert_eq!(tb.squeue(b2, "%T"), "RUNNING");
        std::thread::sleep(Duration::from_millis(500));
    }
    let victims: Vec<&(u32, String)> = placed.iter().filter(|(j, _)| tb.restarts(*j) > 0).collect();
    let report = format!(
        "b2 {b2} on {node}; victims {victims:?}; layout {placed:?}; {}",
        tb.ok("scontrol", &["show", "job", "-o", &b2.to_string()])
    );
    assert!(
        victims.iter().all(|(_, n)| n == node),
        "a job on another node was preempted: {report}"
    );
    assert_eq!(
        victims.len(),
        2,
        "exactly the two {victims_size}-GPU jobs that free {} GPUs: {report}",
        g / 2
    );
    for (j, n) in &placed {
        if !victims.iter().any(|(v, _)| v == j) {
            assert_eq!(tb.squeue(*j, "%T"), "RUNNING", "job {j} on {n}: {report}");
            assert_eq!(tb.restarts(*j), 0);
        }
    }
    // Slurm's record: each victim's first attempt ended PREEMPTED (requeued).
    for (j, _) in &victims {
        let rows = wait_until(
            Duration::from_secs(20),
            "the victim's attempt in sacct",
            || {
                let rows = tb.sacct(*j, "State,NodeList");
                if rows
                    .iter()
                    .any(|r| r[0] == "PREEMPTED" || r[0] == "REQUEUED")
                {
                    Ok(rows)
                } else {
                    Err(format!("{rows:?}"))
                }
            },
        );
        assert!(
            rows.iter()
                .any(|r| (r[0] == "PREEMPTED" || r[0] == "REQUEUED") && &r[1] == node),
            "job {j}: {rows:?}"
        );
    }
}
