package clusterip

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

// byFamilyAndManager indexes IPAddresses by their family and managed-by
// labels: upstream's allocator lists by exactly these to count the IPs it
// holds, twice for every IP it hands out, while it holds its lock.
const byFamilyAndManager = "kubeboot.io/family-and-manager"

// IndexedInformer is an IPAddress informer whose lister answers the
// allocator's count query (both labels required equal) from an index,
// instead of matching every IPAddress's labels against the selector.
// The answers are the same.
type IndexedInformer struct {
	networkinginformers.IPAddressInformer
}

// NewIndexedInformer adds the index to informer, which must not have
// started yet.
func NewIndexedInformer(informer networkinginformers.IPAddressInformer) (IndexedInformer, error) {
	err := informer.Informer().AddIndexers(cache.Indexers{byFamilyAndManager: func(obj any) ([]string, error) {
		ip, ok := obj.(*networkingv1.IPAddress)
		if !ok {
			return nil, nil
		}
		family, ok1 := ip.Labels[networkingv1.LabelIPAddressFamily]
		manager, ok2 := ip.Labels[networkingv1.LabelManagedBy]
		if !ok1 || !ok2 {
			return nil, nil
		}
		return []string{familyAndManager(family, manager)}, nil
	}})
	if err != nil {
		return IndexedInformer{}, fmt.Errorf("indexing IPAddresses: %w", err)
	}
	return IndexedInformer{informer}, nil
}

func familyAndManager(family, manager string) string { return family + "/" + manager }

// Lister implements networkinginformers.IPAddressInformer.
func (i IndexedInformer) Lister() networkinglisters.IPAddressLister {
	return indexedLister{IPAddressLister: i.IPAddressInformer.Lister(), indexer: i.Informer().GetIndexer()}
}

type indexedLister struct {
	networkinglisters.IPAddressLister
	indexer cache.Indexer
}

func (l indexedLister) List(selector labels.Selector) ([]*networkingv1.IPAddress, error) {
	key, ok := indexKey(selector)
	if !ok {
		return l.IPAddressLister.List(selector)
	}
	objs, err := l.indexer.ByIndex(byFamilyAndManager, key)
	if err != nil {
		return nil, err
	}
	out := make([]*networkingv1.IPAddress, 0, len(objs))
	for _, obj := range objs {
		if ip, ok := obj.(*networkingv1.IPAddress); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

// indexKey is the index value selector asks for, if it requires exactly
// a family and a manager and nothing else.
func indexKey(selector labels.Selector) (string, bool) {
	reqs, selectable := selector.Requirements()
	if !selectable || len(reqs) != 2 {
		return "", false
	}
	values := map[string]string{}
	for _, r := range reqs {
		if (r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals) || r.Values().Len() != 1 {
			return "", false
		}
		values[r.Key()] = r.Values().UnsortedList()[0]
	}
	family, ok1 := values[networkingv1.LabelIPAddressFamily]
	manager, ok2 := values[networkingv1.LabelManagedBy]
	if !ok1 || !ok2 {
		return "", false
	}
	return familyAndManager(family, manager), true
}
