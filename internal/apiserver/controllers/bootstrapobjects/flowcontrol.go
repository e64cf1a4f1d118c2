package bootstrapobjects

import (
	"context"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	flowcontrolbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolinformers "k8s.io/client-go/informers/flowcontrol/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/ensurer"
)

// flowControlInterval is how often the API Priority and Fairness
// configuration is ensured again after start, as upstream's.
const flowControlInterval = time.Minute

// FlowControl keeps kube-apiserver's API Priority and Fairness
// configuration: the mandatory and suggested PriorityLevelConfigurations
// and FlowSchemas, with upstream's ensure strategies (mandatory objects
// are always restored, suggested ones unless their
// apf.kubernetes.io/autoupdate-spec annotation is false) and removal of
// auto-updated objects upstream no longer suggests.
//
// It replaces the priority-and-fairness-config-producer hook of upstream's
// storage provider for the reason RBAC replaces its hook: upstream's
// creates the ~20 objects one by one; here the priority levels are
// stored concurrently, then the flow schemas.
type FlowControl struct {
	levels  ensurer.ObjectOps[*flowcontrolv1.PriorityLevelConfiguration]
	schemas ensurer.ObjectOps[*flowcontrolv1.FlowSchema]
	synced  []cache.InformerSynced
}

// NewFlowControl reads through informers, which it registers; the caller
// starts them.
func NewFlowControl(client flowcontrolclient.FlowcontrolV1Interface, informers flowcontrolinformers.Interface) *FlowControl {
	levels, schemas := informers.PriorityLevelConfigurations(), informers.FlowSchemas()
	return &FlowControl{
		levels:  ensurer.NewPriorityLevelConfigurationOps(client.PriorityLevelConfigurations(), levels.Lister()),
		schemas: ensurer.NewFlowSchemaOps(client.FlowSchemas(), schemas.Lister()),
		synced:  []cache.InformerSynced{levels.Informer().HasSynced, schemas.Informer().HasSynced},
	}
}

// Ensure stores the configuration, retrying until it succeeded or Timeout,
// and then ensures it again every flowControlInterval until ctx ends.
func (f *FlowControl) Ensure(ctx context.Context) error {
	if err := waitForSync(ctx, "API Priority and Fairness", f.synced); err != nil {
		return err
	}
	if err := untilDone(ctx, "API Priority and Fairness configuration", f.ensure); err != nil {
		return err
	}
	// Kept so, as kube-apiserver does: again at once, then every
	// interval.
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := f.ensure(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Ensuring the API Priority and Fairness configuration failed, will retry")
		}
	}, flowControlInterval)
	return nil
}

// ensure ensures every object once: the priority levels first, which the
// flow schemas name, then the flow schemas, then removes what upstream no
// longer suggests.
func (f *FlowControl) ensure(ctx context.Context) error {
	mandatoryLevel := ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()
	suggestedLevel := ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()
	mandatorySchema := ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.FlowSchema]()
	suggestedSchema := ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.FlowSchema]()

	var levels []func() error
	for _, pl := range flowcontrolbootstrap.MandatoryPriorityLevelConfigurations {
		levels = append(levels, func() error { return ensurer.EnsureConfiguration(ctx, f.levels, pl, mandatoryLevel) })
	}
	for _, pl := range flowcontrolbootstrap.SuggestedPriorityLevelConfigurations {
		levels = append(levels, func() error { return ensurer.EnsureConfiguration(ctx, f.levels, pl, suggestedLevel) })
	}
	if err := run(levels); err != nil {
		return err
	}

	var schemas []func() error
	for _, fs := range flowcontrolbootstrap.MandatoryFlowSchemas {
		schemas = append(schemas, func() error { return ensurer.EnsureConfiguration(ctx, f.schemas, fs, mandatorySchema) })
	}
	for _, fs := range flowcontrolbootstrap.SuggestedFlowSchemas {
		schemas = append(schemas, func() error { return ensurer.EnsureConfiguration(ctx, f.schemas, fs, suggestedSchema) })
	}
	if err := run(schemas); err != nil {
		return err
	}

	allSchemas := append(append([]*flowcontrolv1.FlowSchema(nil), flowcontrolbootstrap.MandatoryFlowSchemas...), flowcontrolbootstrap.SuggestedFlowSchemas...)
	if err := ensurer.RemoveUnwantedObjects(ctx, f.schemas, allSchemas); err != nil {
		return err
	}
	allLevels := append(append([]*flowcontrolv1.PriorityLevelConfiguration(nil), flowcontrolbootstrap.MandatoryPriorityLevelConfigurations...), flowcontrolbootstrap.SuggestedPriorityLevelConfigurations...)
	return ensurer.RemoveUnwantedObjects(ctx, f.levels, allLevels)
}
