"""클러스터 검증: thresholds, the run plan, the agents' jobs and the verdicts."""
