"""What a round is, engine-neutral: FedAvg's round, the gradient strategies' step, the loop, the run's result.

``fedavg`` holds `FedAvgRounds` (sampling, client training, weighted sums, the algorithms'
hooks, the server step); ``gradient`` holds `GradientRounds`, allreduce's and reweighted's step
in pieces an engine drives; ``hooks`` the checks of what a method's hooks return; ``drive`` the
loop over rounds; ``result`` `RunResult`, the rounds of a config and resuming them. Every engine
(`fedsim.engines`) builds on these and may subclass them; nothing here imports an engine.
"""
