# mistake: dropout on output
# feedback: output of w_2
# source: own
# A student's, from the course v3 walk-through: scored full marks before the train-mode comparison.

class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.w_2(torch.relu(self.w_1(x))))
