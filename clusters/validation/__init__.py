"""클러스터 검증 (issue 14): thresholds, the run plan, the agents' jobs and the verdicts."""
