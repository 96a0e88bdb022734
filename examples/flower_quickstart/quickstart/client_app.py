"""quickstart: the ClientApp, which trains the global model on its node's partition."""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from fedsim.flower import ClientMethod
from quickstart.task import Net, load_data, train

app = ClientApp()


@app.train()
def client_train(msg: Message, context: Context) -> Message:
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    trainloader = load_data(context.node_config["partition-id"], context.node_config["num-partitions"],
                            context.run_config["batch-size"], msg.content["config"]["server-round"])
    method = ClientMethod(msg, context, model)
    train_loss = train(model, trainloader, context.run_config["local-epochs"], msg.content["config"]["lr"], "cpu",
                       method)
    return method.reply({"train_loss": train_loss, "num-examples": len(trainloader.dataset)})
